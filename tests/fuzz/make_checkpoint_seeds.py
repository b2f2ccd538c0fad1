"""Writes the checkpoint fuzzer's seed corpus from a real (tiny) checkpoint written by folio.

    python3 make_checkpoint_seeds.py FOLIO_BINARY OUT_DIR

Four seeds, so that mutations reach every stage of the loader: the file as folio wrote it
(checksums and all), the same without its checksums (a mutated header or data then still gets
past them to the structure checks), the same without any metadata (the PyTorch-written path that
reads the structure off tensor shapes), and a minimal hand-made file with F16, BF16, F64 and I64
tensors. Run again only when the checkpoint format changes; the seeds are checked in.
"""

import json
import os
import struct
import subprocess
import sys
import tempfile

TEXT = "abc def, gh! abc; def: gh? abc.\n" * 8  # characters of fuzz_checkpoint.cpp's vocabulary


def split(raw):
    (size,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + size]), raw[8 + size:]


def join(header, data):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def main(folio, out_dir):
    work = tempfile.mkdtemp(prefix="folio_fuzz_seeds_")
    data = os.path.join(work, "input.txt")
    with open(data, "w") as f:
        f.write(TEXT)
    subprocess.run([folio, "train", "--config", "tiny", "--data", data, "--out_dir", work,
                    "--n_layer=1", "--n_head=2", "--n_embd=4", "--head_size=0", "--block_size=4",
                    "--batch_size=2", "--max_iters=1", "--eval_iters=1", "--sample_tokens=0"],
                   check=True, capture_output=True)
    with open(os.path.join(work, "ckpt.safetensors"), "rb") as f:
        raw = f.read()
    header, tensors = split(raw)
    unchecked = json.loads(json.dumps(header))
    for key in ("data_sha256", "header_sha256"):
        unchecked["__metadata__"].pop(key, None)
    bare = {name: entry for name, entry in header.items() if name != "__metadata__"}
    small = {"h": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},
             "b": {"dtype": "BF16", "shape": [1, 2], "data_offsets": [4, 8]},
             "d": {"dtype": "F64", "shape": [1], "data_offsets": [8, 16]},
             "i": {"dtype": "I64", "shape": [], "data_offsets": [16, 24]},
             "__metadata__": {"note": "x"}}
    seeds = {"folio_checkpoint": raw, "without_checksums": join(unchecked, tensors),
             "without_metadata": join(bare, tensors),
             "dtypes": join(small, struct.pack("<HHHHdq", 0x3C00, 0x8001, 0xC000, 0x7F80, 0.25, 7))}
    os.makedirs(out_dir, exist_ok=True)
    for name, content in seeds.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(content)
        print(f"{name}: {len(content)} bytes")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
