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
    path = os.path.join(work, "input.dat")
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


def compare(what, items, got, expected, eot=EOT):
    """`got` and `expected` are id lists of the items joined by <|endoftext|> (id `eot`)."""
    if got == expected:
        return
    for item, g, e in zip(items, split_at(got, eot), split_at(expected, eot)):
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

# 5. A tokenizer.json with its own regex, in GPT-4's and Llama 3's layout (a Split, then a
# ByteLevel without regex): cl100k's pattern, in a BPE that HF's trainer learns here. Its lines
# all end in punctuation, which cl100k's pattern keeps with the newline (a token "!\n"): where
# folio cuts GPT-2 text for its threads would cut such pieces.
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
exclaimed = "".join(f"Line {i}, said he!\n" for i in range(40000))
split_hf = Tokenizer(models.BPE())
split_hf.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(ref.CL100K_PATTERN), behavior="isolated"),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
split_hf.decoder = decoders.ByteLevel()
split_hf.train_from_iterator(
    [exclaimed, shakespeare],
    trainers.BpeTrainer(vocab_size=1000, show_progress=False, special_tokens=[ref.END_OF_TEXT],
                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
split_hf.save(os.path.join(work, "split.json"))
texts = TEXTS + [shakespeare, exclaimed]
expected = split_hf.encode(ref.END_OF_TEXT.join(texts)).ids
got = json.loads(run_folio(os.path.join(work, "split.json"),
                           ref.END_OF_TEXT.join(texts).encode(), "--threads", "2"))
compare("encode, HF-trained tokenizer.json with cl100k's pattern", texts, got, expected,
        split_hf.token_to_id(ref.END_OF_TEXT))

# 6. What folio writes for that tokenizer (prepare's tokenizer.json; checkpoints and `folio
# export` store the same text) is, for HF tokenizers, the tokenizer HF trained.
prepared = os.path.join(work, "split_prepared")
result = subprocess.run([folio, "prepare", "--data", os.path.join(work, "input.dat"), "--tokenizer",
                         os.path.join(work, "split.json"), "--out", prepared], capture_output=True)
if result.returncode != 0:
    sys.exit(f"folio prepare failed: {result.stderr.decode(errors='replace')}")
written = Tokenizer.from_file(os.path.join(prepared, "tokenizer.json"))
compare("encode, HF loading the tokenizer.json folio wrote for cl100k's pattern", texts,
        written.encode(ref.END_OF_TEXT.join(texts)).ids, expected,
        split_hf.token_to_id(ref.END_OF_TEXT))

# 7. Added tokens HF loads in its own way: one with empty content is skipped; one spelled like a
# vocabulary token ("ab", 397) takes the vocabulary's id whatever id the file gives it, and the
# text around it is split there (the merges still make "ab" inside " abc"), and so for one with
# the vocabulary's own id ("a", 64). folio's ids are HF's.
with open(os.path.join(work, "tokenizer.json"), encoding="utf-8") as f:
    gpt2_json = json.load(f)
sample = ("xaby abc ab a cat<|endoftext|>ab\n" + shakespeare[:3000]).encode("utf-8")
for content, token_id in (("", 50257), ("ab", 50257), ("a", 64)):
    variant = dict(gpt2_json, added_tokens=gpt2_json["added_tokens"] + [
        {"id": token_id, "content": content, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": True}])
    path = os.path.join(work, "added.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(variant, f)
    got = json.loads(run_folio(path, sample))
    expected = Tokenizer.from_file(path).encode(sample.decode("utf-8")).ids
    if got != expected:
        failures.append(f"the added token {content!r} (id {token_id}): folio {got[:16]}... != "
                        f"HF {expected[:16]}...")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"folio = tiktoken = HF tokenizers on {len(TEXTS)} hostile texts, {len(BYTES)} invalid "
      "UTF-8 byte strings and tiny-Shakespeare, from 3 file layouts, and with cl100k's pattern "
      "from a tokenizer.json, read and written; added tokens read as HF reads them")
