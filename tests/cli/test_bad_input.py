"""Bad input: each case gives one clear error line on stderr, a non-zero exit, and never touches
the good checkpoint already in out_dir.

    python3 test_bad_input.py FOLIO_BINARY DATA_FILE
"""

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

from refusal_checks import refusal_problems, report


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def rewrite_header(source, target, edit):
    """Copies a safetensors file, letting `edit` change its JSON header (data unchanged)."""
    with open(source, "rb") as f:
        raw = f.read()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    edit(header)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(target, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + raw[8 + size:])


def main(folio, data):
    work = tempfile.mkdtemp(prefix="folio_bad_input_")
    out_dir = os.path.join(work, "run")
    common = ["--config", "tiny", "--max_iters=1", "--eval_iters=1", "--sample_tokens=0"]
    subprocess.run([folio, "train", "--data", data, "--out_dir", out_dir] + common, check=True,
                   capture_output=True)
    good = os.path.join(out_dir, "ckpt.safetensors")
    good_hash = sha256(good)

    def path(name, content):
        p = os.path.join(work, name)
        with open(p, "wb") as f:
            f.write(content)
        return p

    empty = path("empty.txt", b"")
    latin1 = path("latin1.txt", "caf\u00e9 cr\u00e8me br\u00fbl\u00e9e\n".encode("latin-1") * 100)
    short = path("short.txt", b"To be or not to be.\n")
    truncated = path("truncated.safetensors", open(good, "rb").read()[:1000])
    wrong_shape = os.path.join(work, "wrong_shape.safetensors")

    def transpose(header):
        header["blocks.0.ffwd.net.0.weight"]["shape"] = list(reversed(
            header["blocks.0.ffwd.net.0.weight"]["shape"]))
    rewrite_header(good, wrong_shape, transpose)

    # A tokenizer for the prepare cases, and files of the wrong kind.
    tokenizer = os.path.join(work, "tok.json")
    subprocess.run([folio, "tokenizer", "train", "--data", data, "--vocab_size", "300", "--out",
                    tokenizer], check=True, capture_output=True)
    text_as_checkpoint = path("text.safetensors", b"To be or not to be, that is the question.\n")
    bom_config = path("bom.conf", b"\xef\xbb\xbfn_layer = 2\n")
    damaged_run = os.path.join(work, "damaged_run")  # a run whose training state lost a bit
    shutil.copytree(out_dir, damaged_run)
    with open(os.path.join(damaged_run, "state.safetensors"), "r+b") as f:
        f.seek(-5, os.SEEK_END)
        byte = f.read(1)
        f.seek(-5, os.SEEK_END)
        f.write(bytes([byte[0] ^ 0x10]))

    train = [folio, "train", "--out_dir", out_dir] + common
    cases = [
        ("missing data file", train + ["--data", os.path.join(work, "nope.txt")], "does not exist"),
        ("empty data file", train + ["--data", empty], "is empty"),
        ("non-UTF-8 data file", train + ["--data", latin1], "is not valid UTF-8"),
        ("too-short data file", train + ["--data", short], "is too short"),
        ("unknown config key", train + ["--data", data, "--lerning_rate=1e-3"],
         "did you mean --learning_rate?"),
        ("malformed value", train + ["--data", data, "--batch_size=lots"], "is not an integer"),
        ("out-of-range value", train + ["--data", data, "--dropout=1.5"], "out of range"),
        ("n_embd not divisible by n_head", train + ["--data", data, "--head_size=0"],
         "n_embd (32) is not divisible by n_head (3)"),
        ("unknown preset", [folio, "train", "--config", "shakespeare", "--data", data,
                            "--out_dir", out_dir], "unknown config 'shakespeare'"),
        ("prompt outside the vocabulary", [folio, "sample", "--ckpt", good, "--prompt", "Zoë"],
         "not in the model's vocabulary"),
        ("missing checkpoint", [folio, "eval", "--ckpt", os.path.join(work, "none.safetensors"),
                                "--data", data], "does not exist"),
        ("truncated checkpoint", [folio, "eval", "--ckpt", truncated, "--data", data],
         "truncated"),
        ("wrong-shaped checkpoint", [folio, "sample", "--ckpt", wrong_shape],
         "blocks.0.ffwd.net.0.weight has shape [32, 128], but the config needs [128, 32]"),
        ("checkpoint for training", train + ["--data", data, "--init_from", truncated],
         "truncated"),
        ("unknown command", [folio, "trian"], "unknown command"),
        # Outputs that would replace a good checkpoint, or could not be written.
        ("import over a checkpoint", [folio, "import", "--hf", work, "--out", good],
         "exists: pass --force to replace it"),
        ("tokenizer over a checkpoint", [folio, "tokenizer", "train", "--data", data,
                                         "--vocab_size", "300", "--out", good], "exists"),
        ("misspelt pattern name", [folio, "tokenizer", "train", "--data", data, "--vocab_size",
                                   "300", "--out", os.path.join(work, "t2.json"), "--pattern",
                                   "gpt3"], "no such pattern; give gpt2, cl100k or a regex"),
        ("prepare into a file", [folio, "prepare", "--data", data, "--tokenizer", tokenizer,
                                 "--out", os.path.join(short, "tokens")],
         "give --out DIR a folder you can write"),
        # Inputs of the wrong kind.
        ("a folder as the prompt file", [folio, "sample", "--ckpt", good, "--prompt_file", work],
         "is a folder, not a file"),
        ("a text as a checkpoint", [folio, "eval", "--ckpt", text_as_checkpoint, "--data", data],
         "does not start with a length and a JSON header"),
        ("a checkpoint as a config", [folio, "train", "--config", good, "--data", data,
                                      "--out_dir", out_dir], "is not a text config file"),
        # Options that would be silently ignored or overridden.
        ("resume from a damaged state", [folio, "train", "--resume", damaged_run],
         "or start a new run from the run's checkpoint: --init_from"),
        ("resume and init_from", [folio, "train", "--resume", out_dir, "--init_from", good],
         "drop --init_from"),
        ("a model key in eval", [folio, "eval", "--ckpt", good, "--data", data, "--block_size=8"],
         "folio eval takes the model from the checkpoint; drop --block_size"),
        ("a training key in sample", [folio, "sample", "--ckpt", good, "--learning_rate=1"],
         "--learning_rate does nothing in folio sample"),
        ("a host key in sample", [folio, "sample", "--ckpt", good, "--out_dir", work],
         "--out_dir does nothing in folio sample"),
        ("a text for a folio checkpoint", [folio, "sample", "--ckpt", good, "--data", latin1],
         "carries its own vocabulary (a text is needed only for files written by PyTorch)"),
        ("threads in info", [folio, "info", good, "--threads=3"],
         "--threads does nothing in folio info"),
        ("a train_fraction for a token folder", [folio, "eval", "--ckpt", good, "--data", work,
                                                 "--train_fraction=0.5"],
         "--train_fraction does nothing for"),
        ("a train_fraction for a token folder in train", train + ["--data", work,
                                                                  "--train_fraction=0.5"],
         "--train_fraction does nothing for"),
        ("a folder as a config", [folio, "train", "--config", work, "--data", data],
         "is a folder: give a preset"),
        ("a flag given twice unlike", [folio, "info", good, "--json", "--json=false"],
         "--json is given twice, as true and as false"),
        ("a key given twice", train + ["--data", data, "--seed=2", "--seed=3"],
         "--seed is given twice (2 and 3)"),
        ("a misspelt sample option", [folio, "sample", "--ckpt", good, "--temprature=0.5"],
         "`folio sample --help` lists its options"),
        ("a cosine key for the constant schedule", train + ["--data", data, "--warmup_iters=10"],
         "warmup_iters does nothing with lr_schedule = constant"),
        ("no training text", train + ["--data", data, "--train_fraction=0"],
         "train_fraction is 0"),
        ("sample without --ckpt", [folio, "sample"], "needs --ckpt"),
    ]
    failures = []
    for name, command, expected in cases:
        result = subprocess.run(command, capture_output=True, text=True)
        problems = refusal_problems(result, expected)
        if sha256(good) != good_hash:
            problems.append("the good checkpoint changed")
        report(name, result, problems, failures)
    # Two problems of one command line, both named by one run (eval's --max_windows had been
    # thrown at once, before the unknown option was seen).
    result = subprocess.run([folio, "eval", "--ckpt", good, "--max_windows", "x", "--bogus"],
                            capture_output=True, text=True)
    lines = result.stderr.strip().splitlines()
    problems = [] if result.returncode == 2 and len(lines) == 2 and "--max_windows" in lines[0] \
        and "--bogus" in lines[1] else [f"exit {result.returncode}, {len(lines)} lines"]
    report("two problems of eval at once", result, problems, failures)
    # A prompt the model cannot read is a bad value: exit code 2, as any usage error (it was 1).
    result = subprocess.run([folio, "sample", "--ckpt", good, "--prompt", "Zoë"],
                            capture_output=True, text=True)
    report("a prompt outside the vocabulary exits 2", result,
           [] if result.returncode == 2 else [f"exit {result.returncode}"], failures)
    # Accepted: a key given twice with one value, a config file that starts with a UTF-8
    # byte-order mark (as some editors write it), and a boolean key given bare (true, as a flag).
    for name, command, expected in [
            ("a key given twice alike", [folio, "train", "--config", "tiny", "--max_iters=2",
                                         "--max_iters=2", "--print_config"], "max_iters = 2"),
            ("a config with a byte-order mark", [folio, "train", "--config", bom_config,
                                                 "--print_config"], "n_layer = 2"),
            ("a bare boolean key", [folio, "train", "--config", "tiny", "--tie_weights",
                                    "--print_config"], "tie_weights = true")]:
        result = subprocess.run(command, capture_output=True, text=True)
        problems = [] if result.returncode == 0 and expected in result.stdout else [
            f"exit {result.returncode}, {expected!r} not printed"]
        report(name, result, problems, failures)
    # A device as the text never ends: refused before a byte is read, by the character path, the
    # BPE path, prepare and tokenize (`--data /dev/zero` had read until memory ran out).
    for name, command in [
            ("a device as the text", train + ["--data", "/dev/zero"]),
            ("a device as the text to tokenise", train + ["--data", "/dev/zero", "--tokenizer",
                                                          tokenizer]),
            ("a device to prepare", [folio, "prepare", "--data", "/dev/zero", "--tokenizer",
                                     tokenizer, "--out", os.path.join(work, "zero_tokens")]),
            ("a device to tokenise at once", [folio, "tokenize", "--data", "/dev/zero",
                                              "--tokenizer", tokenizer])]:
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=30)
            report(name, result, refusal_problems(result, "is a device, not a file"), failures)
        except subprocess.TimeoutExpired:
            failures.append(name)
            print(f"{name}: FAIL still reading after 30 s")
    # A pipe ends, so it is read as a file is: the text's characters, its tokens (it had been
    # refused, "cannot read /dev/stdin", where the tokens are read from a file at offsets), and
    # prepare's token files, byte for byte those of the file.
    with open(data, encoding="utf-8", newline="") as f:
        text = f.read()
    pipe_out = os.path.join(work, "pipe_run")
    for name, extra in [("a pipe as the text", []),
                        ("a pipe as the text to tokenise", ["--tokenizer", tokenizer])]:
        result = subprocess.run([folio, "train", "--data", "/dev/stdin", "--out_dir", pipe_out,
                                 "--overwrite"] + common + extra, input=text, capture_output=True,
                                text=True, encoding="utf-8")
        report(name, result, [] if result.returncode == 0 else [f"exit {result.returncode}"],
               failures)
    prepared, exits = {}, []
    for source in ("file", "pipe"):
        prepared[source] = os.path.join(work, f"{source}_tokens")
        result = subprocess.run(
            [folio, "prepare", "--data", data if source == "file" else "/dev/stdin",
             "--tokenizer", tokenizer, "--out", prepared[source]],
            input=text, capture_output=True, text=True, encoding="utf-8")
        exits.append(result.returncode)
    same = exits == [0, 0] and all(
        sha256(os.path.join(prepared["file"], name)) == sha256(os.path.join(prepared["pipe"], name))
        for name in ("train.bin", "val.bin"))
    report("a pipe to prepare", result, [] if same else [f"exits {exits}, or not the file's tokens"],
           failures)
    # A checkpoint or a token file as the text is named for what it is (it had been "not valid
    # UTF-8 ... convert it to UTF-8"), by the character path, the BPE path and prepare.
    shard = os.path.join(prepared["file"], "train_000000.bin")
    for name, command, expected in [
            ("a checkpoint as the text", train + ["--data", good],
             "is a checkpoint (safetensors), not a text: start a run from it with --init_from"),
            ("a checkpoint as the text to tokenise", train + ["--data", good, "--tokenizer",
                                                              tokenizer], "is a checkpoint"),
            ("a checkpoint to prepare", [folio, "prepare", "--data", good, "--tokenizer",
                                         tokenizer, "--out", os.path.join(work, "ckpt_tokens")],
             "is a checkpoint"),
            ("nanoGPT's train.bin as the text",
             train + ["--data", os.path.join(prepared["file"], "train.bin")],
             "likely a token file (nanoGPT's raw ids, as folio prepare writes them): pass the "
             f"folder that holds train.bin and val.bin, --data {prepared['file']}"),
            ("an llm.c shard as the text", train + ["--data", shard],
             f"is a token file (llm.c's shard layout), not a text: pass the folder that holds "
             f"the train and val token files, --data {prepared['file']}"),
            ("an llm.c shard as the text to tokenise",
             train + ["--data", shard, "--tokenizer", tokenizer], "is a token file")]:
        result = subprocess.run(command, capture_output=True, text=True)
        report(name, result, refusal_problems(result, expected), failures)
    print(f"{len(cases) - len(failures)}/{len(cases)} cases passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
