"""`folio train` writes its checkpoints and training states on a thread of their own while the
steps go on (src/io/background_writes.h). With an evaluation every step, most of them improving,
saves follow each other closely; what the user gets must still be what synchronous saves gave:

- a `val loss improved, saved PATH` line for every evaluation whose val loss was the best so far
  (read from metrics.jsonl), each once and in step order;
- at exit, ckpt.safetensors holds the last of them (its step and val loss), whole and loadable;
- state.safetensors holds the end of the run, and a resumed run continues from it;
- no temporary file is left in out_dir.

    python3 test_background_saves.py FOLIO_BINARY DATA_FILE
"""

import json
import os
import re
import subprocess
import sys
import tempfile


def main(folio, data):
    work = tempfile.mkdtemp(prefix="folio_background_saves_")
    out_dir = os.path.join(work, "run")
    head = os.path.join(work, "input.txt")
    with open(data, "rb") as f, open(head, "wb") as g:
        g.write(f.read(200000))
    train = [folio, "train", "--config", "tiny", "--data", head, "--out_dir", out_dir,
             "--eval_interval=1", "--eval_iters=2", "--sample_tokens=0", "--checkpoint_interval=7"]
    result = subprocess.run(train + ["--max_iters=60"], capture_output=True, text=True)
    failures = []
    if result.returncode != 0:
        print(result.stdout[-2000:], result.stderr[-2000:])
        return 1

    evals = [r for r in map(json.loads, open(os.path.join(out_dir, "metrics.jsonl")))
             if r["type"] == "eval"]
    best, improved = float("inf"), []
    for record in evals:
        if record["val_loss"] < best:
            best = record["val_loss"]
            improved.append(record["step"])
    saved = [int(m.group(1)) for m in
             re.finditer(r"^step (\d+): val loss improved, saved (\S+)$", result.stdout, re.M)]
    if len(improved) < 10:
        failures.append(f"only {len(improved)} evaluations improved: too few saves to overlap")
    if saved != improved:
        failures.append(f"saved lines at steps {saved}, improvements at {improved}")

    info = json.loads(subprocess.run([folio, "info", os.path.join(out_dir, "ckpt.safetensors"),
                                      "--json"], capture_output=True, text=True, check=True).stdout)
    if info["step"] != improved[-1] or abs(info["val_loss"] - best) > 1e-12:
        failures.append(f"ckpt.safetensors is of step {info['step']} (val {info['val_loss']}), "
                        f"the best was step {improved[-1]} (val {best})")
    leftovers = [name for name in os.listdir(out_dir) if ".tmp" in name]
    if leftovers:
        failures.append(f"temporary files left in out_dir: {leftovers}")

    resumed = subprocess.run(
        [folio, "train", "--resume", out_dir, "--max_iters=64", "--sample_tokens=0"],
        capture_output=True, text=True)
    if resumed.returncode != 0 or not re.search(r"^step 60: train loss", resumed.stdout, re.M):
        failures.append("resuming from the state saved at the end did not start at step 60: "
                        + (resumed.stdout + resumed.stderr)[-500:])

    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print(f"ok: {len(saved)} background saves in step order, the last one on disk at exit")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
