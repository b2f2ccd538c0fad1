"""The kernel table of an `ncu --csv --metrics gpu__time_duration.sum` log: each kernel's calls
and time in the run's last training step, largest first, as markdown.

    python3 ncu_kernel_table.py LOG STEPS

LOG is what bench/gpu/gpu_check.sh's ncu step wrote (folio bench's own lines, ncu's ==PROF==
lines and the CSV rows); STEPS the steps the run made (warm-up included). The table is the last
step alone: the kernels after the last-but-one launch of the optimizer (adamw_kernel). The first
step also makes the bf16 copies that later steps refresh in passing (on an H200, 14
convert_to_bf16 launches, 0.67 ms, in the first of two steps and none in the second), so a table
that averaged both steps showed work no step repeats. A log with fewer than two optimizer
launches is tabled whole, divided by STEPS.
"""
import csv
import sys
from collections import defaultdict

UNITS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0,
         "second": 1e3, "s": 1e3}
OPTIMIZER = "adamw_kernel"


def main(log_path, steps):
    with open(log_path, encoding="utf-8", errors="replace") as log:
        rows = [line for line in log if line.startswith('"')]
    if not rows:
        sys.exit(f"ncu_kernel_table: no CSV rows in {log_path}")
    launches = [row for row in csv.DictReader(rows)
                if row.get("Metric Name") == "gpu__time_duration.sum"]
    optimizer = [i for i, row in enumerate(launches) if row["Kernel Name"] == OPTIMIZER]
    if len(optimizer) >= 2:
        launches, divisor, what = launches[optimizer[-2] + 1:], 1, "the last step"
    else:
        divisor, what = steps, f"all {steps} steps, averaged"
    calls, total_ms = defaultdict(int), defaultdict(float)
    for row in launches:
        unit = UNITS.get(row.get("Metric Unit", "nsecond"), 1e-6)
        name = row["Kernel Name"]
        calls[name] += 1
        total_ms[name] += float(row["Metric Value"].replace(",", "")) * unit
    everything = sum(total_ms.values())
    print(f"({what})")
    print()
    print("| kernel | calls/step | ms/step | share |")
    print("|---|---|---|---|")
    for name in sorted(total_ms, key=total_ms.get, reverse=True)[:25]:
        print(f"| {name[:80]} | {calls[name] / divisor:.1f} | {total_ms[name] / divisor:.3f} | "
              f"{100 * total_ms[name] / everything:.1f}% |")
    print(f"| all {len(total_ms)} kernels | {sum(calls.values()) / divisor:.1f} | "
          f"{everything / divisor:.3f} | 100% |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]))
