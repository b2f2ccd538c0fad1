"""Hostile checkpoint files given to `folio eval` and `folio sample`: bit flips in the header and in
the data (one making a NaN weight: the data checksum, checked on the pass that loads the values,
names the damage), an oversized header, wrong dtypes, missing, extra and overlapping tensors, NaN
weights (with valid checksums, as a diverged run would write them), a config describing a huge
model, a folder, and /dev/zero (a device that never ends). Each must give one `folio: error:` line naming the problem, a non-zero exit,
nothing on stdout, no crash and no sanitizer report (scripts/sanitize.sh runs this against the
sanitized binary).
(test_bad_input.py covers a missing, truncated and wrong-shaped checkpoint.)

    python3 test_hostile_checkpoints.py FOLIO_BINARY DATA_FILE
"""

import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

from refusal_checks import refusal_problems, report


def split(raw):
    (size,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + size]), raw[8 + size:]


def join(header, data, checksums):
    """A safetensors file; with `checksums`, folio's data and header checksums are recomputed
    (as folio's writer computes them), so only the loader's own checks can refuse it."""
    header = json.loads(json.dumps(header))
    metadata = header.setdefault("__metadata__", {})
    metadata.pop("data_sha256", None)
    metadata.pop("header_sha256", None)
    if checksums:
        metadata["data_sha256"] = hashlib.sha256(data).hexdigest()
        metadata["header_sha256"] = "0" * 64
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    if checksums:
        digest = hashlib.sha256(text).hexdigest().encode()
        text = text.replace(b'"header_sha256":"' + b"0" * 64, b'"header_sha256":"' + digest)
    return struct.pack("<Q", len(text)) + text + data


def main(folio, data):
    work = tempfile.mkdtemp(prefix="folio_hostile_")
    out_dir = os.path.join(work, "run")
    subprocess.run([folio, "train", "--config", "tiny", "--data", data, "--out_dir", out_dir,
                    "--max_iters=1", "--eval_iters=1", "--sample_tokens=0"],
                   check=True, capture_output=True)
    with open(os.path.join(out_dir, "ckpt.safetensors"), "rb") as f:
        good = f.read()
    header, tensors = split(good)
    header_size = struct.unpack("<Q", good[:8])[0]

    def variant(name, content):
        path = os.path.join(work, name + ".safetensors")
        with open(path, "wb") as f:
            f.write(content)
        return path

    def edited(edit, checksums=False):
        h, d = json.loads(json.dumps(header)), bytearray(tensors)
        edit(h, d)
        return join(h, bytes(d), checksums)

    def flip(offset):
        damaged = bytearray(good)
        damaged[offset] ^= 0x04
        return bytes(damaged)

    def nan_by_damage():
        """ln_f.weight's first value turned into a NaN by bits flipped on the disk: its stored
        checksum no longer matches, and that (not the NaN) is the error to give."""
        damaged = bytearray(good)
        at = 8 + header_size + header["ln_f.weight"]["data_offsets"][0]
        damaged[at:at + 4] = struct.pack("<f", float("nan"))
        return bytes(damaged)

    def set_dtype(dtype, shape=None):
        def edit(h, d):
            h["blocks.0.ffwd.net.0.weight"]["dtype"] = dtype
            if shape:
                h["blocks.0.ffwd.net.0.weight"]["shape"] = shape
        return edit

    def nan_weight(h, d):
        begin = h["ln_f.weight"]["data_offsets"][0]
        d[begin:begin + 4] = struct.pack("<f", float("nan"))

    def huge_config(h, d):
        config = json.loads(h["__metadata__"]["config"])
        config.update(n_layer=4096, n_head=4, n_embd=1 << 20, head_size=0)
        h["__metadata__"]["config"] = json.dumps(config)

    def overlap(h, d):
        begin, end = h["ln_f.weight"]["data_offsets"]
        h["ln_f.weight"]["data_offsets"] = [begin - 4, end - 4]

    def extra(h, d):
        h["blocks.9.ln1.weight"] = {"dtype": "F32", "shape": [0],
                                    "data_offsets": [len(d), len(d)]}

    step_at = good.index(b'"step":"') + 8
    cases = [
        ("flipped bit in the header's metadata", flip(step_at), "its header does not match"),
        ("flipped bit in a tensor name", flip(good.index(b"ffwd.net.0.weight")),
         "its header does not match"),
        ("flipped bit in the header length", flip(4), "limit 100 MiB"),
        ("flipped bit in the middle of the data", flip(8 + header_size + len(tensors) // 2),
         "tensor data does not match the checksum stored in it: re-download it or use another "
         "checkpoint"),
        ("flipped bits that make a NaN weight", nan_by_damage(), "tensor data does not match"),
        ("oversized header", struct.pack("<Q", 1 << 33) + good[8:], "limit 100 MiB"),
        ("header longer than the file", struct.pack("<Q", len(good)) + good[8:],
         "runs past the end"),
        ("integer dtype", edited(set_dtype("I32")), "must be floating point"),
        ("I64 dtype", edited(set_dtype("I64", [64, 32])),
         "has shape [64, 32], but the config needs [128, 32]"),
        ("F16 of another shape", edited(set_dtype("F16", [256, 32])),
         "has shape [256, 32], but the config needs [128, 32]"),
        ("missing tensor", edited(lambda h, d: h.pop("lm_head.bias")), "lacks tensor lm_head.bias"),
        ("extra tensor", edited(extra), "has tensor blocks.9.ln1.weight"),
        ("overlapping tensors", edited(overlap), "two tensors overlap"),
        ("NaN weight with valid checksums", edited(nan_weight, checksums=True),
         "non-finite parameter"),
        ("config of a huge model", edited(huge_config, checksums=True),
         "but its tensors hold at most"),
    ]
    failures = []
    runs = 0
    for name, content, expected in cases:
        path = variant(name.replace(" ", "_").replace("'", ""), content)
        for command in ([folio, "eval", "--ckpt", path, "--data", data],
                        [folio, "sample", "--ckpt", path, "--max_new_tokens", "5"]):
            runs += 1
            result = subprocess.run(command, capture_output=True, text=True)
            problems = refusal_problems(result, expected)
            # The values are checked on the one pass that loads them: nothing may be sampled or
            # evaluated from a model that got values of a refused file.
            if result.stdout.strip():
                problems.append(f"printed {result.stdout.strip()[:200]!r}")
            report(f"{name} ({command[1]})", result, problems, failures)
    result = subprocess.run([folio, "eval", "--ckpt", out_dir, "--data", data],
                            capture_output=True, text=True)
    runs += 1
    report("a folder as checkpoint", result, refusal_problems(result, "is a folder"), failures)
    # A device that never ends: refused after its first 9 bytes (it was read until memory ran
    # out); `folio info` reads a file twice, so it refuses devices and pipes outright.
    for command, expected in (([folio, "eval", "--ckpt", "/dev/zero", "--data", data],
                               "does not start with a length and a JSON header"),
                              ([folio, "info", "/dev/zero"], "which a pipe or device cannot give")):
        runs += 1
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=30)
            report(f"/dev/zero ({command[1]})", result, refusal_problems(result, expected),
                   failures)
        except subprocess.TimeoutExpired:
            failures.append(f"/dev/zero ({command[1]}): still reading after 30 s")
            print(f"FAIL /dev/zero ({command[1]}): still reading after 30 s")
    print(f"{runs - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
