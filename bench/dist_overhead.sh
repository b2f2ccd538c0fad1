#!/usr/bin/env bash
# What data parallelism costs on this CPU: the same global batch trained by one process with all
# the cores, and by 2 ranks (folio train --nproc 2, Gloo; and mpirun -np 2) with half the cores
# and half the batch each. A third run, one process with half the cores on half the batch, is a
# rank's compute without any communication, so (2 ranks - that) is what the all-reduce and the
# rank agreement cost. The Gloo run twice: summing each block's gradients while the backward pass
# goes on (the default) and once after it (--overlap_gradient_sums=false). Median ms/step over the
# train records after the first (warm-up) interval.
# Prints a markdown table (README "Several processes", "Cost of data parallelism").
#   bench/dist_overhead.sh [CONFIG STEPS LOG_INTERVAL]...  (default: baby 300 50, shakespeare_char 24 4)
set -euo pipefail
cd "$(dirname "$0")/.."
folio="$(realpath build/folio)"
data="${FOLIO_TEST_DATA:-$(./scripts/fetch_data.sh)}"
cores=$(nproc)
half=$((cores / 2))
[ "$half" -ge 1 ] || { echo "dist_overhead: needs at least 2 cores" >&2; exit 1; }
runs=("$@")
[ ${#runs[@]} -eq 0 ] && runs=(baby 300 50 shakespeare_char 24 4)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# median ms_per_step of the train records of OUT_DIR/metrics.jsonl, the first one left out
median_ms() {
  python3 - "$1/metrics.jsonl" <<'PY'
import json, statistics, sys
ms = [r["ms_per_step"] for r in map(json.loads, open(sys.argv[1])) if r["type"] == "train"]
print(f"{statistics.median(ms[1:] or ms):.2f}")
PY
}

echo "| config | global batch | 1 process, $cores threads | 2 ranks --nproc (Gloo), $half each | the same, sums after the backward pass | 2 ranks mpirun, $half each | 1 process, $half threads, half batch | 2-rank overhead vs 1 process | communication per step |"
echo "|---|---|---|---|---|---|---|---|---|"
set -- "${runs[@]}"
while [ $# -ge 3 ]; do
  config=$1 steps=$2 interval=$3
  shift 3
  batch=$(sed -n 's/^batch_size *= *\([0-9]*\).*/\1/p' "configs/$config.conf")
  [ -n "$batch" ] && [ $((batch % 2)) -eq 0 ] || { echo "dist_overhead: $config needs an even batch_size" >&2; exit 1; }
  common=(--config "$config" --data "$data" --max_iters "$steps" --eval_interval 1000000 --eval_iters 1
          --log_interval "$interval" --checkpoint_interval 0 --sample_tokens 0 --quiet --overwrite)
  "$folio" train "${common[@]}" --threads "$cores" --out_dir "$work/one" >/dev/null
  "$folio" train "${common[@]}" --nproc 2 --batch_size $((batch / 2)) --out_dir "$work/tcp" >/dev/null
  "$folio" train "${common[@]}" --nproc 2 --batch_size $((batch / 2)) --overlap_gradient_sums=false \
    --out_dir "$work/after" >/dev/null
  mpirun -np 2 --bind-to none "$folio" train "${common[@]}" --threads "$half" \
    --batch_size $((batch / 2)) --out_dir "$work/mpi" >/dev/null
  "$folio" train "${common[@]}" --threads "$half" --batch_size $((batch / 2)) \
    --out_dir "$work/half" >/dev/null
  one=$(median_ms "$work/one") tcp=$(median_ms "$work/tcp") after=$(median_ms "$work/after")
  mpi=$(median_ms "$work/mpi") alone=$(median_ms "$work/half")
  python3 - "$config" "$batch" "$one" "$tcp" "$after" "$mpi" "$alone" <<'PY'
import sys
config, batch = sys.argv[1], sys.argv[2]
one, tcp, after, mpi, alone = map(float, sys.argv[3:8])
print(f"| {config} | {batch} | {one:.2f} | {tcp:.2f} | {after:.2f} | {mpi:.2f} | {alone:.2f} | "
      f"{(tcp / one - 1) * 100:+.1f}% (Gloo), {(mpi / one - 1) * 100:+.1f}% (MPI) | "
      f"{tcp - alone:.2f} ms (Gloo), {mpi - alone:.2f} ms (MPI) |")
PY
done
echo
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $cores cores, $(date -u +%Y-%m-%d)"
