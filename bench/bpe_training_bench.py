"""BPE training speed: `folio tokenizer train` against HF tokenizers' BpeTrainer on the same text
(TEXT repeated N times), the same vocabulary size and the same threads, side by side; the merges
they learn are checked equal.

usage: PYTHONPATH=build/pydeps python3 bench/bpe_training_bench.py build/folio TEXT
       [--repeat 10] [--vocab_size 8192] [--threads 2]"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "tokenizer"))
import gpt2_reference as ref  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("folio")
parser.add_argument("text")
parser.add_argument("--repeat", type=int, default=10)
parser.add_argument("--vocab_size", type=int, default=8192)
parser.add_argument("--threads", type=int, default=2)
args = parser.parse_args()
os.environ["RAYON_NUM_THREADS"] = str(args.threads)  # HF tokenizers' thread pool
ref.require("tokenizers")
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

work = tempfile.mkdtemp(prefix="folio_bpe_bench_")
path = os.path.join(work, "text.txt")
with open(args.text, encoding="utf-8") as f:
    text = f.read()
with open(path, "w", encoding="utf-8") as f:
    for _ in range(args.repeat):
        f.write(text)
size_mb = os.path.getsize(path) / 1e6

before = resource.getrusage(resource.RUSAGE_CHILDREN)
wall = time.perf_counter()
out = os.path.join(work, "folio.json")
subprocess.run([args.folio, "tokenizer", "train", "--data", path, "--vocab_size",
                str(args.vocab_size), "--out", out, "--threads", str(args.threads)], check=True,
               stderr=subprocess.DEVNULL)
folio_wall = time.perf_counter() - wall
after = resource.getrusage(resource.RUSAGE_CHILDREN)
folio_cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime

tokenizer = Tokenizer(models.BPE())
tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tokenizer.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=args.vocab_size - 1, show_progress=False,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
cpu = time.process_time()
wall = time.perf_counter()
tokenizer.train([path], trainer)
hf_wall = time.perf_counter() - wall
hf_cpu = time.process_time() - cpu

with open(out, encoding="utf-8") as f:
    ours = json.load(f)["model"]["merges"]
theirs = [m if isinstance(m, str) else " ".join(m)
          for m in json.loads(tokenizer.to_str())["model"]["merges"]]
print(json.dumps({"text_MB": round(size_mb, 1), "vocab_size": args.vocab_size,
                  "threads": args.threads, "merges": len(ours), "merges_equal": ours == theirs,
                  "folio_s": round(folio_wall, 2), "hf_s": round(hf_wall, 2),
                  "folio_cpu_s": round(folio_cpu, 2), "hf_cpu_s": round(hf_cpu, 2),
                  "hf_over_folio_wall": round(hf_wall / folio_wall, 2)}))
