"""folio tokenizer train: the tokenizer.json it writes loads in HF tokenizers and encodes and
decodes exactly as folio does; its merges are the ones HF's BpeTrainer learns from the same
text; and bad requests get one clear error.

usage: test_bpe_training.py FOLIO DATA WORKDIR"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference as ref  # noqa: E402
from hostile_corpus import TEXTS  # noqa: E402

folio, data, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)  # tokenizer train refuses to replace what a run left
os.makedirs(work)
ref.require("tokenizers")
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

VOCAB = 1000
failures = []
out = os.path.join(work, "tok.json")
result = subprocess.run([folio, "tokenizer", "train", "--data", data, "--vocab_size", str(VOCAB),
                         "--out", out], capture_output=True, text=True)
if result.returncode != 0:
    sys.exit(f"folio tokenizer train failed: {result.stderr}")
print(result.stderr.strip().splitlines()[-1])

# 1. HF loads it, and encodes and decodes as folio does.
hf = Tokenizer.from_file(out)
if hf.get_vocab_size() != VOCAB or hf.token_to_id(ref.END_OF_TEXT) != VOCAB - 1:
    failures.append(f"HF sees {hf.get_vocab_size()} tokens, <|endoftext|> at "
                    f"{hf.token_to_id(ref.END_OF_TEXT)}; expected {VOCAB}, at {VOCAB - 1}")
with open(data, encoding="utf-8") as f:
    shakespeare = f.read()
texts = TEXTS + [shakespeare]
path = os.path.join(work, "texts.txt")
with open(path, "w", encoding="utf-8") as f:
    f.write(ref.END_OF_TEXT.join(texts))
got = json.loads(subprocess.run([folio, "tokenize", "--tokenizer", out, "--data", path],
                                capture_output=True, check=True).stdout)
expected = hf.encode(ref.END_OF_TEXT.join(texts)).ids
if got != expected:
    first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b),
                 min(len(got), len(expected)))
    failures.append(f"folio and HF encode differently with the trained tokenizer: {len(got)} vs "
                    f"{len(expected)} ids, first difference at {first}")
decoded = subprocess.run([folio, "tokenize", "--tokenizer", out, "--decode", "--data", "/dev/stdin"],
                         input=json.dumps(expected).encode(), capture_output=True).stdout
if decoded.decode() != ref.END_OF_TEXT.join(texts) or hf.decode(expected, skip_special_tokens=False) != ref.END_OF_TEXT.join(texts):
    failures.append("decoding the trained tokenizer's ids does not give the text back")

# 2. The same merges as HF's own trainer (byte-level, all 256 bytes, no special tokens: those
# are folio's first 256 ids; folio adds <|endoftext|> after the merges).
tokenizer = Tokenizer(models.BPE())
tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tokenizer.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=VOCAB - 1, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                              show_progress=False)
tokenizer.train([data], trainer)


def compare_merges(what, tokenizer_json, hf_tokenizer):
    """The merges of folio's tokenizer.json against those HF's trainer put in hf_tokenizer."""
    theirs = [m if isinstance(m, str) else " ".join(m)
              for m in json.loads(hf_tokenizer.to_str())["model"]["merges"]]
    with open(tokenizer_json, encoding="utf-8") as f:
        ours = json.load(f)["model"]["merges"]
    if ours != theirs:
        first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b),
                     min(len(ours), len(theirs)))
        failures.append(f"{what}: merges differ from HF's BpeTrainer: {len(ours)} vs "
                        f"{len(theirs)}, first difference at merge {first}: "
                        f"{ours[first:first + 1]} vs {theirs[first:first + 1]}")
    return ours


ours = compare_merges("GPT-2's pattern", out, tokenizer)

# 2b. With GPT-4's pre-tokenisation (--pattern cl100k): the merges HF's BpeTrainer learns behind
# the same Split + ByteLevel pre-tokenizer, and a tokenizer.json in that layout which HF encodes
# with as folio does.
split_out = os.path.join(work, "tok_cl100k.json")
result = subprocess.run([folio, "tokenizer", "train", "--data", data, "--vocab_size", str(VOCAB),
                         "--pattern", "cl100k", "--out", split_out], capture_output=True, text=True)
if result.returncode != 0:
    sys.exit(f"folio tokenizer train --pattern cl100k failed: {result.stderr}")
from tokenizers import Regex  # noqa: E402
split_tokenizer = Tokenizer(models.BPE())
split_tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(ref.CL100K_PATTERN), behavior="isolated"),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
split_tokenizer.decoder = decoders.ByteLevel()
# The text as one sequence (train([file]) reads a file line by line, and cl100k's pattern keeps
# a run of newlines in one piece, which lines would cut).
split_tokenizer.train_from_iterator([shakespeare], trainers.BpeTrainer(
    vocab_size=VOCAB - 1, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
if compare_merges("--pattern cl100k", split_out, split_tokenizer) == ours:
    failures.append("--pattern cl100k learnt GPT-2's merges: the pattern was not used")
got = json.loads(subprocess.run([folio, "tokenize", "--tokenizer", split_out, "--data", path],
                                capture_output=True, check=True).stdout)
if got != Tokenizer.from_file(split_out).encode(ref.END_OF_TEXT.join(texts)).ids:
    failures.append("--pattern cl100k: HF and folio encode differently with the trained tokenizer")

# 3. Bad requests.
for args, words in ((["--vocab_size", "100"], "257"),
                    (["--vocab_size", "lots"], "vocab_size"),
                    (["--data", os.path.join(work, "absent.txt")], "cannot read"),
                    (["--pattern", "(unclosed"], "does not compile")):
    command = [folio, "tokenizer", "train", "--data", data, "--vocab_size", "300", "--out",
               os.path.join(work, "bad.json"), "--pattern", "gpt2"]
    for k in range(0, len(args), 2):
        command[command.index(args[k]) + 1] = args[k + 1]
    bad = subprocess.run(command, capture_output=True, text=True)
    lines = bad.stderr.strip().splitlines()
    if bad.returncode == 0 or len(lines) != 1 or "folio: error:" not in lines[0] or words not in lines[0]:
        failures.append(f"{args}: expected one error line with '{words}', got {bad.stderr!r}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"trained {VOCAB} tokens: HF loads them and encodes {len(expected)} ids as folio does; "
      "merges equal to HF's BpeTrainer, with GPT-2's pre-tokenisation and with cl100k's")
