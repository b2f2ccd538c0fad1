"""The kernel table of an `ncu --csv --metrics gpu__time_duration.sum` log: each kernel's calls
and total time per training step, largest first, as markdown.

    python3 ncu_kernel_table.py LOG STEPS

LOG is what bench/gpu/gpu_check.sh's ncu step wrote (folio bench's own lines, ncu's ==PROF==
lines and the CSV rows); STEPS the steps the run made (warm-up included), which every kernel's
total is divided by. Kernels launched once for the whole run (setup, uploads) are divided too, so
their rows read small, as they should.
"""
import csv
import sys
from collections import defaultdict

UNITS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0,
         "second": 1e3, "s": 1e3}


def main(log_path, steps):
    rows = []
    with open(log_path, encoding="utf-8", errors="replace") as log:
        rows = [line for line in log if line.startswith('"')]
    if not rows:
        sys.exit(f"ncu_kernel_table: no CSV rows in {log_path}")
    reader = csv.DictReader(rows)
    calls, total_ms = defaultdict(int), defaultdict(float)
    for row in reader:
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = UNITS.get(row.get("Metric Unit", "nsecond"), 1e-6)
        value = float(row["Metric Value"].replace(",", ""))
        name = row["Kernel Name"]
        calls[name] += 1
        total_ms[name] += value * unit
    everything = sum(total_ms.values())
    print("| kernel | calls/step | ms/step | share |")
    print("|---|---|---|---|")
    for name in sorted(total_ms, key=total_ms.get, reverse=True)[:25]:
        print(f"| {name[:80]} | {calls[name] / steps:.1f} | {total_ms[name] / steps:.3f} | "
              f"{100 * total_ms[name] / everything:.1f}% |")
    print(f"| all {len(total_ms)} kernels | {sum(calls.values()) / steps:.1f} | "
          f"{everything / steps:.3f} | 100% |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]))
