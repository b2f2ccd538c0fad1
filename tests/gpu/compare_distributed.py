"""Data-parallel training on a GPU computes what one GPU process computes.

  1. one process on the GPU (dtype fp32), `tiny`, 30 steps, dropout on: the reference;
  2. one rank under a torchrun-style environment (WORLD_SIZE=1), and under PyTorch's torchrun
     itself (`torchrun --no-python --nproc_per_node 1 folio train ...`) where the Python running
     this has it: a job of one rank sums nothing (its communicator is the local one), so the
     losses must be the same bits as the reference; the NCCL communicator itself is tested on its
     own (NcclCommunicatorTest in folio_distributed_tests);
  3. two ranks sharing the one GPU (`--nproc 2`, half the batch each): NCCL refuses two ranks on
     one GPU, so the sums go through host memory over Gloo; same losses within 1e-4;
  4. the same two ranks over MPI when mpirun is installed (when this folio was built without
     MPI, that case says so and is left out).

    python3 compare_distributed.py FOLIO DATA WORK_DIR
Exits 77 (skipped) without a visible GPU; fails instead with FOLIO_REQUIRE_GPU=1. A GPU probe that
fails for any other reason is a failure.
"""

import json
import os
import shutil
import subprocess
import sys

from gpu_required import skip


def metrics(out_dir):
    train, evals = {}, {}
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            (train if r["type"] == "train" else evals)[r["step"]] = (
                r["loss"] if r["type"] == "train" else (r["train_loss"], r["val_loss"]))
    return train, evals


def worst(a, b):
    result = 0.0
    for key in a:
        xs = a[key] if isinstance(a[key], tuple) else (a[key],)
        ys = b[key] if isinstance(b[key], tuple) else (b[key],)
        result = max(result, max(abs(x - y) / abs(y) for x, y in zip(xs, ys)))
    return result


def main(folio, data, work):
    shutil.rmtree(work, ignore_errors=True)
    probe = subprocess.run([folio, "bench", "--config", "tiny", "--device", "cuda", "--steps", "1",
                            "--warmup", "0"], capture_output=True, text=True)
    if probe.returncode != 0:
        if "no CUDA GPU is visible" in probe.stderr:
            skip("no CUDA GPU is visible")
        print(f"FAIL: the GPU probe (folio bench on the GPU) failed, exit {probe.returncode}:\n"
              f"{probe.stderr.strip()[-2000:]}")
        return 1
    base_env = {k: v for k, v in os.environ.items()
                if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    base_env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    train = ["train", "--config", "tiny", "--data", data, "--device", "cuda", "--dtype", "fp32",
             "--max_iters=30", "--eval_interval=10", "--eval_iters=4", "--log_interval=1",
             "--sample_tokens=0", "--checkpoint_interval=0"]
    runs = {
        "one GPU process": ([folio] + train + ["--batch_size=16"], {}),
        "torchrun-style, one rank": ([folio] + train + ["--batch_size=16"],
                           {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                            "MASTER_PORT": "29591"}),
        "two ranks on one GPU (Gloo)": ([folio] + train + ["--batch_size=8", "--nproc", "2"], {}),
    }
    torchrun = shutil.which("torchrun") or shutil.which("torchrun", path=os.path.dirname(
        sys.executable))
    if torchrun:  # PyTorch's own launcher, running folio as the program (--no-python)
        runs["torchrun --nproc_per_node 1"] = (
            [torchrun, "--no-python", "--nproc_per_node", "1", "--master_port", "29592", folio] +
            train + ["--batch_size=16"], {})
    if shutil.which("mpirun"):
        runs["two ranks on one GPU (MPI)"] = (["mpirun", "-np", "2", folio] + train +
                                              ["--batch_size=8"], {})
    failures, results = [], {}
    for name, (command, env) in runs.items():
        out_dir = os.path.join(work, name.replace(" ", "_").replace(",", ""))
        result = subprocess.run(command + ["--out_dir", out_dir], capture_output=True, text=True,
                                env={**base_env, **env})
        if result.returncode != 0:
            if "MPI" in name and "built without MPI" in result.stderr:
                print(f"{name}: left out: mpirun is installed but this folio was built without "
                      "MPI (install libopenmpi-dev, or the MPI of mpirun, and rebuild)")
                continue
            failures.append(f"{name}: exit {result.returncode}: {result.stderr.strip()[-400:]}")
            continue
        announced = [l for l in result.stdout.splitlines() if l.startswith("distributed:")]
        print(f"{name}: {announced[0] if announced else 'one process'}")
        results[name] = metrics(out_dir)
    reference = results.get("one GPU process")
    for name, got in results.items():
        if reference is None or name == "one GPU process":
            continue
        difference = max(worst(got[0], reference[0]), worst(got[1], reference[1]))
        limit = 0.0 if "one rank" in name or "nproc_per_node 1" in name else 1e-4
        print(f"{name}: largest relative loss difference {difference:.2e} (allowed {limit:.0e})")
        if sorted(got[0]) != sorted(reference[0]) or difference > limit:
            failures.append(f"{name}: differs from one process by {difference:.2e}")
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
