"""N ranks compute what one process computes.

For 50 steps of `tiny` with dropout on, in both sampling modes, these follow the same train loss
at every step and the same eval losses:
  - one process, batch_size 2B;
  - mpirun -np 2 (Open MPI), batch_size B;
  - one process, batch_size B, grad_accum 2;
  - `folio train --nproc 2` (Gloo), batch_size B;
  - the same with --overlap_gradient_sums=false (one sum of the whole gradient after the backward
    pass instead of each block's while it goes on): with two ranks each sum is a + b whichever
    buffer it is in, so these two must agree to the bit, at every step.
  - mpirun with a program per rank, rank 0 on one thread and rank 1 on two, which splits its
    batch across them (`threads` may differ between ranks): it must begin the same gradient sums
    as the rank that does not split (before, its one sum of everything met the other's sums of
    blocks, and MPI failed on their lengths).
Within fp32 reduction tolerance: the gradient sums are added in a different order, and 50 Adam
steps carry that rounding forward (1e-4 relative is far above what was seen, far below any real
difference: a wrong window or dropout mask changes the loss in the second decimal).

    python3 test_equivalence.py FOLIO DATA WORK_DIR
"""

import os
import shutil
import sys

from common import largest_relative_difference, read_metrics, run

TOLERANCE = 1e-4
B = 8


def main(folio, data, work):
    shutil.rmtree(work, ignore_errors=True)
    failures = []
    reference_by_mode = {}
    for sampling in ("random", "epoch"):
        common = ["train", "--config", "tiny", "--data", data, "--max_iters=50",
                  "--eval_interval=10", "--eval_iters=4", "--log_interval=1",
                  "--sample_tokens=0", "--checkpoint_interval=0", f"--sampling={sampling}",
                  "--threads=1"]
        runs = {
            "one process, batch 2B": [folio] + common + [f"--batch_size={2 * B}"],
            "mpirun -np 2, batch B": ["mpirun", "-np", "2", folio] + common + [f"--batch_size={B}"],
            "one process, batch B, grad_accum 2": [folio] + common + [f"--batch_size={B}",
                                                                       "--grad_accum=2"],
            "--nproc 2 (Gloo), batch B": [folio] + common + [f"--batch_size={B}", "--nproc", "2"],
            "--nproc 2, sums after the pass": [folio] + common + [
                f"--batch_size={B}", "--nproc", "2", "--overlap_gradient_sums=false"],
            "mpirun, rank 1 on 2 threads (split)": (
                ["mpirun", "-np", "1", folio] + common + [f"--batch_size={B}"] +
                [":", "-np", "1", folio] + [a for a in common if a != "--threads=1"] +
                [f"--batch_size={B}", "--threads=2"]),
        }
        results = {}
        for name, command in runs.items():
            out_dir = os.path.join(work, sampling, name.replace(" ", "_").replace(",", ""))
            if ":" in command:  # a program per rank: each takes the out_dir
                at = command.index(":")
                command = command[:at] + ["--out_dir", out_dir] + command[at:]
            run(command + ["--out_dir", out_dir])
            results[name] = read_metrics(out_dir)
        reference_train, reference_evals = results["one process, batch 2B"]
        if len(reference_train) != 50 or len(reference_evals) != 6:
            failures.append(f"{sampling}: expected 50 train and 6 eval records")
        for name, (train, evals) in results.items():
            if sorted(train) != sorted(reference_train) or sorted(evals) != sorted(reference_evals):
                failures.append(f"{sampling}, {name}: different steps recorded")
                continue
            worst_train = largest_relative_difference(train, reference_train)
            worst_eval = largest_relative_difference(evals, reference_evals)
            print(f"{sampling:6s} {name:38s} train loss max rel diff {worst_train:.2e}, "
                  f"eval {worst_eval:.2e}")
            if not (worst_train < TOLERANCE and worst_eval < TOLERANCE):
                failures.append(f"{sampling}, {name}: differs by {max(worst_train, worst_eval):.2e}")
        overlapped = results["--nproc 2 (Gloo), batch B"]
        if overlapped != results["--nproc 2, sums after the pass"]:
            failures.append(f"{sampling}: the sums during the backward pass and after it differ")
        reference_by_mode[sampling] = reference_train
    # The two modes really draw different windows.
    if largest_relative_difference(reference_by_mode["epoch"], reference_by_mode["random"]) < 1e-3:
        failures.append("sampling=epoch gives the same losses as sampling=random")
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
