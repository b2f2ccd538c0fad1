"""folio prepare: nanoGPT's train.bin/val.bin and llm.c's shards hold exactly tiktoken's ids of
the train and val text (cut as nanoGPT's prepare.py cuts it); a folder is documents ended by
<|endoftext|>; and `--tokenizer gpt2` without the network says so and what to pass instead.

usage: test_token_datasets.py FOLIO DATA WORKDIR"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference as ref  # noqa: E402

folio, data, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
ref.make_tokenizer_dirs(work)
enc = ref.tiktoken_encoding(ref.gpt2_files_dir())
gpt2_dir = os.path.join(work, "gpt2")
failures = []


def prepare(*args, env=None):
    return subprocess.run([folio, "prepare", *args], capture_output=True, text=True, env=env)


def read_raw(path):
    with open(path, "rb") as f:
        raw = f.read()
    return [int.from_bytes(raw[i:i + 2], "little") for i in range(0, len(raw), 2)]


def read_shard(path):
    with open(path, "rb") as f:
        raw = f.read()
    header = [int.from_bytes(raw[4 * i:4 * i + 4], "little", signed=True) for i in range(256)]
    if header[:2] != [20240520, 1] or any(header[3:]):
        failures.append(f"{path}: header {header[:4]}..., not llm.c's [20240520, 1, n, 0...]")
    if len(raw) != 1024 + 2 * header[2]:
        failures.append(f"{path}: {len(raw)} bytes for {header[2]} tokens")
    return read_raw(path)[512:]


# 1. tiny-Shakespeare, as nanoGPT's data/shakespeare/prepare.py cuts it (90% of the characters).
with open(data, encoding="utf-8") as f:
    text = f.read()
cut = int(len(text) * 0.9)
expected = {"train": enc.encode_ordinary(text[:cut]), "val": enc.encode_ordinary(text[cut:])}
out = os.path.join(work, "shakespeare")
result = prepare("--data", data, "--tokenizer", gpt2_dir, "--out", out, "--shard_tokens", "100000")
if result.returncode != 0:
    sys.exit(f"folio prepare failed: {result.stderr}")
for split, ids in expected.items():
    if read_raw(os.path.join(out, f"{split}.bin")) != ids:
        failures.append(f"{split}.bin is not tiktoken's {len(ids)} ids")
    shards = sorted(n for n in os.listdir(out) if n.startswith(split + "_"))
    joined = [i for name in shards for i in read_shard(os.path.join(out, name))]
    if joined != ids or len(shards) != (len(ids) + 99999) // 100000:
        failures.append(f"the {len(shards)} {split} shards do not hold tiktoken's {len(ids)} ids")

# 2. A folder: each file a document followed by <|endoftext|>; the tokenizer written beside.
docs = os.path.join(work, "docs")
os.makedirs(docs)
pieces = ["First document.\n", "Second one, with  spaces. ", "Third\n\n"]
for k, piece in enumerate(pieces):
    with open(os.path.join(docs, f"{k}.txt"), "w", encoding="utf-8") as f:
        f.write(piece * 20)
corpus = "".join(p * 20 + ref.END_OF_TEXT for p in pieces)
cut = int(len(corpus) * 0.8)
out = os.path.join(work, "docs_out")
result = prepare("--data", docs, "--tokenizer", os.path.join(work, "tokenizer.json"), "--out", out,
                 "--val_fraction", "0.2")
train = read_raw(os.path.join(out, "train.bin")) if result.returncode == 0 else []
if train != enc.encode(corpus[:cut], allowed_special="all"):
    failures.append(f"a folder of documents: train.bin is not the documents ended by "
                    f"<|endoftext|> ({result.stderr.strip()})")
written = os.path.join(out, "tokenizer.json")
if not os.path.exists(written):
    failures.append("prepare did not write tokenizer.json beside the tokens")
else:  # GPT-2's tokenizer as folio writes it: HF loads it and encodes as tiktoken does
    from tokenizers import Tokenizer
    sample = text[:5000] + ref.END_OF_TEXT + "  x\n\n  y 123456"
    if Tokenizer.from_file(written).encode(sample).ids != enc.encode(sample, allowed_special="all"):
        failures.append("HF encodes differently with the tokenizer.json prepare wrote")

# 3. gpt2 from the cache; and without the network, one error that says what to do.
cache = os.path.join(work, "cache")
env = dict(os.environ, FOLIO_CACHE_DIR=cache, https_proxy="http://127.0.0.1:9",
           HTTPS_PROXY="http://127.0.0.1:9")
offline = subprocess.run([folio, "tokenize", "--tokenizer", "gpt2"], input="hi", env=env,
                         capture_output=True, text=True)
lines = [l for l in offline.stderr.splitlines() if l.startswith("folio: error:")]
if (offline.returncode == 0 or len(lines) != 1 or "no network" not in lines[0]
        or "--tokenizer DIR" not in lines[0]):
    failures.append(f"gpt2 offline: expected one error naming the network and --tokenizer DIR, "
                    f"got {offline.stderr!r}")
if os.path.exists(os.path.join(cache, "gpt2", "encoder.json.download")):
    failures.append("gpt2 offline left a partial download behind")
shutil.copytree(gpt2_dir, os.path.join(cache, "gpt2"), dirs_exist_ok=True)
cached = subprocess.run([folio, "tokenize", "--tokenizer", "gpt2"], input="Hello world",
                        env=env, capture_output=True, text=True)
if cached.stdout.strip() != "[15496, 995]":
    failures.append(f"gpt2 from the cache: {cached.stdout!r} {cached.stderr!r}")

# 4. Bad requests: one error line each, and no --out folder made for them. --out inside --data
# would be read as documents by the next prepare; --val_fraction 0 has no val split to write.
never_made = os.path.join(work, "never_made")
for args, words in ((["--data", data, "--tokenizer", os.path.join(work, "absent"), "--out", out],
                     "neither gpt2"),
                    (["--data", os.path.join(work, "absent.txt"), "--tokenizer", gpt2_dir, "--out",
                      out], "cannot read"),
                    (["--data", data, "--tokenizer", gpt2_dir], "--out"),
                    (["--data", docs, "--tokenizer", gpt2_dir, "--out", docs + "/"],
                     "inside the --data folder"),
                    (["--data", docs, "--tokenizer", gpt2_dir, "--out",
                      os.path.join(docs, "..", "docs", "tokens")], "inside the --data folder"),
                    (["--data", data, "--tokenizer", gpt2_dir, "--out", never_made,
                      "--val_fraction", "0"], "--val_fraction: 0 is out of range (0, 0.9]"),
                    (["--data", data, "--tokenizer", gpt2_dir, "--out", never_made,
                      "--val_fraction", "1"], "--val_fraction: 1 is out of range (0, 0.9]")):
    bad = prepare(*args)
    lines = bad.stderr.strip().splitlines()
    if bad.returncode == 0 or len(lines) != 1 or words not in lines[0]:
        failures.append(f"prepare {args}: expected one error with '{words}', got {bad.stderr!r}")
for made in (never_made, os.path.join(docs, "tokens")):
    if os.path.exists(made):
        failures.append(f"a refused prepare made {made}")

# 5. The files decode back to the text (`folio tokenize --decode --data FILE.bin` reads them
# through the memory-mapping reader), and damaged ones get one error naming the file and the fix.
def decode_file(path, tokenizer=gpt2_dir):
    return subprocess.run([folio, "tokenize", "--tokenizer", tokenizer, "--decode", "--data", path],
                          capture_output=True)


shakespeare_out = os.path.join(work, "shakespeare")
for name, part in (("val.bin", text[int(len(text) * 0.9):]),
                   ("val_000000.bin", text[int(len(text) * 0.9):])):
    if decode_file(os.path.join(shakespeare_out, name)).stdout != part.encode():
        failures.append(f"{name} does not decode to the val text")
with open(os.path.join(shakespeare_out, "val_000000.bin"), "rb") as f:
    shard = f.read()
small = os.path.join(work, "small.json")
subprocess.run([folio, "tokenizer", "train", "--data", data, "--vocab_size", "300", "--out", small],
               capture_output=True, check=True)
damaged = {"magic_000000.bin": (b"\x07" + shard[1:], gpt2_dir, "wrong magic number"),
           "cut_000000.bin": (shard[:-1], gpt2_dir, "truncated"),
           "empty_000000.bin": (b"", gpt2_dir, "empty"),
           "odd.bin": (b"abc", gpt2_dir, "cut short"),
           "other_000000.bin": (shard, small, "not below the vocabulary size 300")}
for name, (payload, tokenizer, words) in damaged.items():
    path = os.path.join(work, name)
    with open(path, "wb") as f:
        f.write(payload)
    bad = decode_file(path, tokenizer)
    lines = bad.stderr.decode().strip().splitlines()
    if (bad.returncode == 0 or len(lines) != 1 or words not in lines[0] or path not in lines[0]
            or "folio prepare" not in lines[0]):
        failures.append(f"{name}: expected one error naming the file, '{words}' and the fix, got "
                        f"{bad.stderr!r}")

# 6. Preparing again into the same folder: a prepare killed part way leaves the earlier files as
# they were (the new ones are written aside, then moved in); one that finishes leaves only its
# own. The second tokenizer has over 65,536 ids (GPT-2's plus an added token with id 65,536), so
# it writes uint32 shards and no train.bin/val.bin: the first prepare's must go.
def snapshot(folder):
    files = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                files[name] = f.read()
    return files


def prepare_wide_tokenizer():
    with open(os.path.join(work, "tokenizer.json"), encoding="utf-8") as f:
        wide = json.load(f)
    wide["added_tokens"].append({"id": 65536, "content": "<|wide|>", "special": True})
    path = os.path.join(work, "wide.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(wide, f)
    return path


again = os.path.join(work, "again")
first = prepare("--data", data, "--tokenizer", gpt2_dir, "--out", again, "--shard_tokens",
                "100000")
before = snapshot(again)
big = os.path.join(work, "big.txt")
with open(big, "w", encoding="utf-8") as f:
    f.write(text * 8)
wide_tokenizer = prepare_wide_tokenizer()
second = subprocess.Popen([folio, "prepare", "--data", big, "--tokenizer", wide_tokenizer, "--out",
                           again, "--shard_tokens", "1000", "--threads", "1"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def signature(folder):  # what tells, cheaply, that a file of the folder was written
    return {entry.name: (entry.inode(), entry.stat().st_size, entry.stat().st_mtime_ns)
            for entry in os.scandir(folder) if entry.is_file()}


# Killed once it has written a few of its ~2,700 shards, wherever it put them.
unchanged = signature(again)
deadline = time.time() + 60
while second.poll() is None and time.time() < deadline:
    if (sum(name.endswith(".bin") for root, _, names in os.walk(again) if root != again
            for name in names) >= 3 or signature(again) != unchanged):
        break
    time.sleep(0.002)
second.kill()
second.wait()
if first.returncode != 0 or second.returncode != -signal.SIGKILL:
    failures.append(f"an interrupted prepare: the first failed ({first.stderr!r}), or the second "
                    f"ended before it was killed ({second.returncode})")
elif snapshot(again) != before:
    failures.append("a prepare killed part way changed the files of the folder it was replacing")
finished = prepare("--data", data, "--tokenizer", wide_tokenizer, "--out", again)
left = sorted(os.listdir(again))
if finished.returncode != 0 or left != ["tokenizer.json", "train_000000.bin", "val_000000.bin"]:
    failures.append(f"prepare again with a uint32 vocabulary: expected only its shards and "
                    f"tokenizer.json in the folder, found {left} ({finished.stderr.strip()})")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"train.bin/val.bin and llm.c shards = tiktoken's ids ({len(expected['train'])} + "
      f"{len(expected['val'])} tokens) and decode to the text; documents; gpt2 cache and offline "
      "error; damaged token files refused; an interrupted prepare leaves the folder as it was")
