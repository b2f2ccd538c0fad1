"""Bad input: each case gives one clear error line on stderr, a non-zero exit, and never touches
the good checkpoint already in out_dir.

    python3 test_bad_input.py FOLIO_BINARY DATA_FILE
"""

import hashlib
import json
import os
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
        ("sample without --ckpt", [folio, "sample"], "needs --ckpt"),
    ]
    failures = []
    for name, command, expected in cases:
        result = subprocess.run(command, capture_output=True, text=True)
        problems = refusal_problems(result, expected)
        if sha256(good) != good_hash:
            problems.append("the good checkpoint changed")
        report(name, result, problems, failures)
    print(f"{len(cases) - len(failures)}/{len(cases)} cases passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
