"""Training that cannot go on stops with one clear line and loses nothing:

  - weights that overflow (a checkpoint scaled by 1e30, started from with --init_from) make the
    first gradient non-finite: the run stops naming the step and the first offending tensor,
    exit non-zero, and the good checkpoint already in out_dir is not overwritten;
  - an out_dir that cannot be created is refused at start, before any training;
  - a new run refuses an out_dir holding another run's checkpoint unless --overwrite (its first
    save would replace that checkpoint);
  - a checkpoint newer than the training state (a run killed after an evaluation improved it and
    before the next state save: here the state of step 10 put back beside the checkpoint of a
    run that went on to step 30) is not replaced by the resumed run's evaluations, all worse
    than it (before, the state's best val loss was the one to beat, and --resume with
    --max_iters 20 left the model of step 19 where that of step 29 had been).

    python3 test_training_failures.py FOLIO DATA
"""

import array
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile


def scaled_copy(source, target, factor):
    """A copy of a safetensors file with every F32 value multiplied by factor."""
    with open(source, "rb") as f:
        raw = f.read()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    header.get("__metadata__", {}).pop("data_sha256", None)  # the data changes
    values = array.array("f", raw[8 + size:])
    for i in range(len(values)):
        values[i] *= factor
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(target, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + values.tobytes())


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main(folio, data):
    work = tempfile.mkdtemp(prefix="folio_training_failures_")
    out_dir = os.path.join(work, "run")
    common = ["--config", "tiny", "--data", data, "--max_iters=5", "--eval_iters=2",
              "--sample_tokens=0"]
    subprocess.run([folio, "train", "--out_dir", out_dir] + common, check=True,
                   capture_output=True)
    good = os.path.join(out_dir, "ckpt.safetensors")
    good_hash = sha256(good)
    huge = os.path.join(work, "huge.safetensors")
    scaled_copy(good, huge, 1e30)

    failures = []
    result = subprocess.run([folio, "train", "--out_dir", out_dir, "--init_from", huge,
                             "--overwrite"] + common, capture_output=True, text=True)
    error_lines = [l for l in result.stderr.splitlines() if l.startswith("folio: error:")]
    print("non-finite:", result.returncode, error_lines)
    if result.returncode == 0:
        failures.append("non-finite: exit code 0")
    if len(error_lines) != 1 or "step 0: the gradient of" not in error_lines[0] or \
            "is not finite" not in error_lines[0]:
        failures.append(f"non-finite: message {error_lines}")
    if sha256(good) != good_hash:
        failures.append("non-finite: the good checkpoint was overwritten")

    blocked = os.path.join(work, "a_file")
    open(blocked, "w").close()
    result = subprocess.run([folio, "train", "--out_dir", os.path.join(blocked, "run")] + common,
                            capture_output=True, text=True)
    print("unwritable out_dir:", result.returncode, result.stderr.strip())
    if result.returncode == 0 or "give --out_dir a folder you can write" not in result.stderr or \
            "step 0:" in result.stdout:
        failures.append("unwritable out_dir: not refused at start")
    result = subprocess.run([folio, "train", "--out_dir", out_dir] + common,
                            capture_output=True, text=True)
    print("existing run:", result.returncode, result.stderr.strip())
    if result.returncode == 0 or "already holds a run" not in result.stderr or \
            sha256(good) != good_hash:
        failures.append("a new run in an out_dir with a checkpoint was not refused")
    failures += newer_checkpoint_than_state(folio, data, work)
    failures += resumed_into_another_folder(folio, data, work)
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


def newer_checkpoint_than_state(folio, data, work):
    out_dir = os.path.join(work, "newer_checkpoint")
    common = ["--config", "tiny", "--data", data, "--eval_interval=5", "--eval_iters=2",
              "--sample_tokens=0"]
    subprocess.run([folio, "train", "--out_dir", out_dir, "--max_iters=10"] + common, check=True,
                   capture_output=True)
    state = os.path.join(out_dir, "state.safetensors")
    with open(state, "rb") as f:
        state_of_step_10 = f.read()
    subprocess.run([folio, "train", "--resume", out_dir, "--max_iters=30"], check=True,
                   capture_output=True)
    checkpoint = os.path.join(out_dir, "ckpt.safetensors")
    best = sha256(checkpoint)
    with open(state, "wb") as f:
        f.write(state_of_step_10)
    result = subprocess.run([folio, "train", "--resume", out_dir, "--max_iters=20"],
                            capture_output=True, text=True)
    print("checkpoint newer than the state:", result.returncode,
          [line for line in result.stdout.splitlines() if "saved" in line])
    if result.returncode != 0:
        return [f"checkpoint newer than the state: resume failed: {result.stderr[-500:]}"]
    if sha256(checkpoint) != best:
        return ["checkpoint newer than the state: the resumed run replaced it with a worse model"]
    return []


def resumed_into_another_folder(folio, data, work):
    """`--resume A --out_dir B` moves the run: B holds A's model and metrics and goes on from
    them (it had held only the new records, and the summary named a checkpoint never written);
    A is left as it was; a B that holds another run is refused and kept."""
    first, moved, other = (os.path.join(work, name) for name in ("first", "moved", "other"))
    common = ["--config", "tiny", "--data", data, "--eval_interval=5", "--eval_iters=2",
              "--sample_tokens=0"]
    subprocess.run([folio, "train", "--out_dir", first, "--max_iters=10"] + common, check=True,
                   capture_output=True)
    subprocess.run([folio, "train", "--out_dir", other, "--max_iters=5"] + common, check=True,
                   capture_output=True)
    before = {name: sha256(os.path.join(first, name))
              for name in ("ckpt.safetensors", "state.safetensors", "metrics.jsonl")}
    other_model = sha256(os.path.join(other, "ckpt.safetensors"))
    problems = []
    result = subprocess.run([folio, "train", "--resume", first, "--out_dir", moved,
                             "--max_iters=12"], capture_output=True, text=True)
    summary = [line for line in result.stdout.splitlines() if line.startswith("trained")]
    print("resumed into another folder:", result.returncode, summary)
    if result.returncode != 0:
        return [f"resume into another folder failed: {result.stderr[-500:]}"]
    moved_checkpoint = os.path.join(moved, "ckpt.safetensors")
    improved = "val loss improved" in result.stdout
    if not os.path.isfile(moved_checkpoint) or \
            (not improved and sha256(moved_checkpoint) != before["ckpt.safetensors"]):
        problems.append("the moved run's folder lacks the resumed run's best model")
    if not summary or moved_checkpoint not in summary[0]:
        problems.append(f"the summary does not name {moved_checkpoint}: {summary}")
    first_lines = open(os.path.join(first, "metrics.jsonl")).read().splitlines()
    moved_lines = open(os.path.join(moved, "metrics.jsonl")).read().splitlines()
    if moved_lines[:len(first_lines)] != first_lines or len(moved_lines) <= len(first_lines):
        problems.append("the moved run's metrics do not go on from the resumed run's")
    if {name: sha256(os.path.join(first, name)) for name in before} != before:
        problems.append("resuming into another folder changed the resumed run's files")
    result = subprocess.run([folio, "train", "--resume", first, "--out_dir", other,
                             "--max_iters=20"], capture_output=True, text=True)
    if result.returncode == 0 or "already holds a run" not in result.stderr or \
            sha256(os.path.join(other, "ckpt.safetensors")) != other_model:
        problems.append("resuming into a folder that holds another run was not refused")
    return ["resume into another folder: " + p for p in problems]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
