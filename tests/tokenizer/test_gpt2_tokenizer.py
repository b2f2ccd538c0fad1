"""folio's byte-level BPE against tiktoken and HF tokenizers on GPT-2's own files (offline):
encode and decode of a hostile corpus, of invalid UTF-8, of tiny-Shakespeare on 1 and 2 threads,
from each file layout folio reads (encoder.json + vocab.bpe, vocab.json + merges.txt,
tokenizer.json).

usage: test_gpt2_tokenizer.py FOLIO DATA WORKDIR"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference as ref  # noqa: E402
from hostile_corpus import BYTES, TEXTS  # noqa: E402

folio, data, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
hf = ref.make_tokenizer_dirs(work)
enc = ref.tiktoken_encoding(ref.gpt2_files_dir())
EOT = enc.eot_token
failures = []


def run_folio(tokenizer, payload, *extra):
    path = os.path.join(work, "input.bin")
    with open(path, "wb") as f:
        f.write(payload)
    result = subprocess.run([folio, "tokenize", "--tokenizer", tokenizer, "--data", path, *extra],
                            capture_output=True)
    if result.returncode != 0:
        sys.exit(f"folio tokenize failed: {result.stderr.decode(errors='replace')}")
    return result.stdout


def split_at(ids, token):
    parts, current = [], []
    for i in ids:
        if i == token:
            parts.append(current)
            current = []
        else:
            current.append(i)
    return parts + [current]


def compare(what, items, got, expected):
    """`got` and `expected` are id lists of the items joined by <|endoftext|>."""
    if got == expected:
        return
    for item, g, e in zip(items, split_at(got, EOT), split_at(expected, EOT)):
        if g != e:
            failures.append(f"{what}: {item[:60]!r}: folio {g[:12]}... != {e[:12]}...")
            return
    failures.append(f"{what}: the id lists differ ({len(got)} vs {len(expected)} ids)")


# 1. The hostile texts, joined by the special token, from each file layout.
joined = ref.END_OF_TEXT.join(TEXTS).encode("utf-8")
expected = []
for k, text in enumerate(TEXTS):
    expected += ([EOT] if k else []) + enc.encode_ordinary(text)
if enc.encode(ref.END_OF_TEXT.join(TEXTS), allowed_special="all") != expected:
    sys.exit("the reference itself is inconsistent: tiktoken's special-token handling changed")
hf_expected = []
for k, text in enumerate(TEXTS):
    hf_expected += ([EOT] if k else []) + hf.encode(text).ids
compare("HF tokenizers vs tiktoken (the references agree)", TEXTS, hf_expected, expected)
for layout in ("gpt2", "hf", "tokenizer.json"):
    got = json.loads(run_folio(os.path.join(work, layout), joined))
    compare(f"encode ({layout})", TEXTS, got, expected)

# 2. Decode: folio gives back the texts' bytes from tiktoken's ids, and agrees with HF.
ids = enc.encode(ref.END_OF_TEXT.join(TEXTS), allowed_special="all")
decoded = run_folio(os.path.join(work, "gpt2"), json.dumps(ids).encode(), "--decode")
for text, back in zip(TEXTS, decoded.split(ref.END_OF_TEXT.encode())):
    if back != text.encode("utf-8") or hf.decode(enc.encode_ordinary(text)) != text:
        failures.append(f"decode: {text[:60]!r} came back as {back[:60]!r}")

# 3. Invalid UTF-8. folio's rule (src/tokenizer/pretokenizer.h): every maximal run of bytes that
# start no valid character is a piece of its own; the valid text between is split as usual.
# The reference: Python's strict decoder with surrogateescape marks exactly those bytes.
def expected_for_bytes(payload):
    text = payload.decode("utf-8", errors="surrogateescape")
    runs = []  # (invalid?, text) of the maximal runs
    for ch in text:
        invalid = 0xDC80 <= ord(ch) <= 0xDCFF
        if runs and runs[-1][0] == invalid:
            runs[-1][1] += ch
        else:
            runs.append([invalid, ch])
    ids = []
    for invalid, run in runs:
        if invalid:  # tiktoken's BPE of one piece's bytes, without its regex
            ids += enc._encode_single_piece(run.encode("utf-8", errors="surrogateescape"))
        else:
            ids += enc.encode_ordinary(run)
    return ids

expected = []
for k, payload in enumerate(BYTES):
    expected += ([EOT] if k else []) + expected_for_bytes(payload)
got = json.loads(run_folio(os.path.join(work, "gpt2"), ref.END_OF_TEXT.encode().join(BYTES)))
compare("encode invalid UTF-8", BYTES, got, expected)
back = run_folio(os.path.join(work, "gpt2"), json.dumps(got).encode(), "--decode")
for payload, ids, piece in zip(BYTES, split_at(got, EOT), back.split(ref.END_OF_TEXT.encode())):
    if piece != payload or enc.decode_bytes(ids) != payload:
        failures.append(f"invalid UTF-8 does not round-trip: {payload[:40]!r} -> {piece[:40]!r}")

# 4. tiny-Shakespeare whole, on one thread and on two (cut into stretches folio encodes apart).
with open(data, encoding="utf-8") as f:
    shakespeare = f.read()
expected = enc.encode_ordinary(shakespeare)
for threads in ("1", "2"):
    got = json.loads(run_folio(os.path.join(work, "gpt2"), shakespeare.encode(), "--threads",
                               threads))
    if got != expected:
        first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b),
                     min(len(got), len(expected)))
        failures.append(f"tiny-Shakespeare on {threads} thread(s): {len(got)} ids, tiktoken "
                        f"{len(expected)}; first difference at id {first}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"folio = tiktoken = HF tokenizers on {len(TEXTS)} hostile texts, {len(BYTES)} invalid "
      f"UTF-8 byte strings and tiny-Shakespeare ({len(expected)} tokens), from 3 file layouts")
