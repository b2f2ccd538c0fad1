"""A disk that fills up while `folio train` saves out_dir/ckpt.safetensors: the run stops with one
error line naming the file and the full disk, a non-zero exit, the previous checkpoint unchanged
and still loadable, and no temporary file left behind. And standard output on a full disk
(/dev/full): every command that prints exits non-zero with one error line.

    python3 test_disk_full.py FOLIO_BINARY DISK_FULL_SHIM DATA_FILE

DISK_FULL_SHIM is libfolio_disk_full.so (tests/fault_injection/disk_full.cpp), preloaded into
folio: it makes writes to files whose path contains FOLIO_DISK_FULL_PATH fail with ENOSPC after
FOLIO_DISK_FULL_AFTER bytes, or their fsync fail with FOLIO_DISK_FULL_FSYNC=1.
"""

import hashlib
import os
import re
import subprocess
import sys
import tempfile

from refusal_checks import refusal_problems, report


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def preload(folio, shim):
    """LD_PRELOAD for folio with the shim. A sanitized build (scripts/sanitize.sh) needs its
    sanitizer runtime first in the list, so it is named before the shim."""
    libraries = subprocess.run(["ldd", folio], capture_output=True, text=True).stdout
    runtime = re.search(r"\s(/\S*lib(?:asan|ubsan)\.so[.\d]*)\s", libraries)
    return ((runtime.group(1) + ":") if runtime else "") + shim


def main(folio, shim, data):
    work = tempfile.mkdtemp(prefix="folio_disk_full_")
    out_dir = os.path.join(work, "run")
    # The start of the text is enough, and keeps `folio eval` (every window) quick.
    with open(data, "rb") as f:
        head = f.read(30000)
    data = os.path.join(work, "input.txt")
    with open(data, "wb") as f:
        f.write(head)
    train = [folio, "train", "--config", "tiny", "--data", data, "--out_dir", out_dir,
             "--max_iters=1", "--eval_iters=1", "--sample_tokens=0"]
    subprocess.run(train, check=True, capture_output=True)
    checkpoint = os.path.join(out_dir, "ckpt.safetensors")
    good_hash = sha256(checkpoint)

    cases = [
        ("write fails at the first byte", {"FOLIO_DISK_FULL_AFTER": "0"}),
        ("write fails inside the header", {"FOLIO_DISK_FULL_AFTER": "1000"}),
        ("write fails inside the tensor data", {"FOLIO_DISK_FULL_AFTER": "20000"}),
        ("fsync fails after every write succeeded", {"FOLIO_DISK_FULL_FSYNC": "1"}),
    ]
    failures = []
    for name, settings in cases:
        env = dict(os.environ, LD_PRELOAD=preload(folio, shim),
                   FOLIO_DISK_FULL_PATH="ckpt.safetensors.tmp", **settings)
        result = subprocess.run(train + ["--seed=7", "--overwrite"], capture_output=True, text=True,
                                env=env)
        problems = refusal_problems(result, f"cannot write {checkpoint}: the disk is full")
        if sha256(checkpoint) != good_hash:
            problems.append("the previous checkpoint changed")
        leftovers = [f for f in os.listdir(out_dir) if ".tmp" in f]
        if leftovers:
            problems.append(f"temporary files left: {leftovers}")
        evaluation = subprocess.run([folio, "eval", "--ckpt", checkpoint, "--data", data],
                                    capture_output=True, text=True)
        if evaluation.returncode != 0:
            problems.append(f"the previous checkpoint no longer loads: {evaluation.stderr.strip()}")
        report(name, result, problems, failures)
    # Standard output on a full disk (/dev/full): the text a command prints is lost, so it must
    # not exit 0 (`folio sample > out.txt` had, the file cut short). Every command that prints.
    printing = [
        ("sample to a full disk", [folio, "sample", "--ckpt", checkpoint, "--max_new_tokens=200",
                                   "--quiet"]),
        ("eval to a full disk", [folio, "eval", "--ckpt", checkpoint, "--data", data, "--quiet"]),
        ("info to a full disk", [folio, "info", checkpoint]),
        ("help to a full disk", [folio, "sample", "--help"]),
        ("version to a full disk", [folio, "--version"]),
    ]
    if os.path.exists("/dev/full"):
        for name, command in printing:
            with open("/dev/full", "w") as full:
                result = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, text=True)
            report(name, result, refusal_problems(result, "cannot write to standard output"),
                   failures)
        cases += printing
    print(f"{len(cases) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
