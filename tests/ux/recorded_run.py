"""A short real training run for the command tests: `tiny` for 200 steps, evaluated every 50
(about a second on 2 cores), into a fresh folder."""

import os
import subprocess
import tempfile


def train_tiny(folio, data, name="tiny_run", *overrides):
    out_dir = os.path.join(tempfile.mkdtemp(prefix="folio_ux_"), name)
    subprocess.run([folio, "train", "--config", "tiny", "--data", data, "--out_dir", out_dir,
                    "--max_iters=200", "--eval_interval=50", "--eval_iters=10",
                    "--sample_tokens=0", *overrides],
                   check=True, capture_output=True)
    return out_dir


def check_errors(cases, failures):
    """Each (command, expected) must fail with one `folio: error:` line containing `expected`."""
    for command, expected in cases:
        result = subprocess.run(command, capture_output=True, text=True)
        lines = result.stderr.strip().splitlines()
        if result.returncode == 0:
            failures.append(f"{command[1:]}: exit code 0")
        elif (len(lines) != 1 or not lines[0].startswith("folio: error: ")
              or expected not in lines[0]):
            failures.append(f"{command[1:]}: stderr {result.stderr!r} lacks {expected!r}")


def report(failures):
    """Prints the failures; the exit code for the test."""
    for failure in failures:
        print("FAIL", failure)
    print("ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0
