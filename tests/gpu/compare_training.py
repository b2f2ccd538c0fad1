"""folio train on the CPU and on the GPU, dtype fp32, dropout on: the training loss of every one
of 50 steps must agree to 1e-4 relative, for the tiny preset and for shakespeare_char's model
(at batch 2, so that the CPU's share of the test stays short).

    python3 compare_training.py FOLIO DATA WORK_DIR

Exits 77 (ctest's "skipped") when the GPU run reports that no GPU is visible; fails instead
with FOLIO_REQUIRE_GPU=1 (gpu_required.py).
"""

import json
import os
import shutil
import subprocess
import sys

from gpu_required import skip

TOLERANCE = 1e-4
STEPS = 50
CASES = [("tiny", []), ("shakespeare_char", ["--batch_size=2"])]


def train(folio, data, out_dir, config, device, overrides):
    shutil.rmtree(out_dir, ignore_errors=True)  # a fresh run each time
    command = [folio, "train", "--config", config, "--data", data, "--out_dir", out_dir,
               f"--device={device}", "--dtype=fp32", f"--max_iters={STEPS}", "--log_interval=1",
               "--eval_interval=1000000", "--eval_iters=1", "--sample_tokens=0", *overrides]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        if device == "cuda" and "no CUDA GPU is visible" in result.stderr:
            skip("no CUDA GPU is visible")
        sys.exit(f"{' '.join(command)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    losses = {}
    with open(os.path.join(out_dir, "metrics.jsonl")) as log:
        for line in log:
            record = json.loads(line)
            if record.get("type") == "train":
                losses[record["step"]] = record["loss"]
    return losses


def main(folio, data, work_dir):
    failures = 0
    for config, overrides in CASES:
        runs = {device: train(folio, data, os.path.join(work_dir, f"{config}_{device}"), config,
                              device, overrides)
                for device in ("cuda", "cpu")}  # the GPU first: without one, skip at once
        worst, worst_step = 0.0, 0
        for step in range(1, STEPS + 1):
            cpu, gpu = runs["cpu"].get(step), runs["cuda"].get(step)
            if cpu is None or gpu is None:
                print(f"FAIL {config}: no training loss for step {step}")
                failures += 1
                break
            error = abs(gpu - cpu) / abs(cpu)
            if error > worst:
                worst, worst_step = error, step
        status = "ok" if worst < TOLERANCE else "FAIL"
        failures += status == "FAIL"
        print(json.dumps({"config": config, "steps": STEPS, "status": status,
                          "worst_relative_difference": worst, "at_step": worst_step,
                          "loss_cpu": runs["cpu"].get(STEPS),
                          "loss_cuda": runs["cuda"].get(STEPS)}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
