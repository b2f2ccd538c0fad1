#!/usr/bin/env bash
# The `tiny` training step when folio shares the CPU: alone, two folio processes side by side,
# and two ranks of one job (`folio train --nproc 2`), with every core's worth of threads per
# process (what each process took before) or half of them (a rank's default now), and OpenMP's
# wait policies (default: spin a while, then sleep; active: spin; passive: sleep at once).
# Median ms/step after a warm-up; prints a markdown table (README "Sharing the CPU").
#   bench/contention.sh [STEPS [RANK_STEPS]]   (default 2000, long enough for the pairs to
#   overlap, and 60 for --nproc 2)
set -euo pipefail
cd "$(dirname "$0")/.."
folio="$(realpath build/folio)"
data="${FOLIO_TEST_DATA:-$(./scripts/fetch_data.sh)}"
steps="${1:-2000}"
rank_steps="${2:-60}"  # oversubscribed ranks can take seconds a step
cores=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# `folio bench` prints one JSON line; its ms_per_step is the median of the timed steps.
bench_ms() {
  python3 -c 'import json, sys; print("%.2f" % json.loads(sys.stdin.read())["ms_per_step"])'
}
bench() { "$folio" bench --config tiny --steps "$steps" --warmup 20 "$@"; }

# Two `folio bench` side by side; prints "A ms / B ms".
side_by_side() {
  bench "$@" > "$work/a.json" &
  local first=$!
  bench "$@" > "$work/b.json"
  wait "$first"
  echo "$(bench_ms < "$work/a.json") / $(bench_ms < "$work/b.json")"
}

# `folio train --nproc 2`: median ms_per_step of rank 0's logged windows, the first left out.
two_ranks() {
  local out="$work/nproc"
  "$folio" train --nproc 2 --config tiny --data "$data" --out_dir "$out" --max_iters "$rank_steps" \
    --eval_interval 1000000 --eval_iters 1 --log_interval 5 --checkpoint_interval 0 \
    --sample_tokens 0 --quiet --overwrite "$@" > /dev/null
  python3 - "$out/metrics.jsonl" <<'PY'
import json, statistics, sys
ms = [r["ms_per_step"] for r in map(json.loads, open(sys.argv[1])) if r["type"] == "train"]
print(f"{statistics.median(ms[1:] or ms):.2f}")
PY
}

half=$((cores / 2 > 0 ? cores / 2 : 1))
alone=$(bench | bench_ms)
pair_default=$(side_by_side --threads="$cores")
pair_active=$(OMP_WAIT_POLICY=active side_by_side --threads="$cores")
pair_passive=$(OMP_WAIT_POLICY=passive side_by_side --threads="$cores")
pair_half=$(side_by_side --threads="$half")
pair_half_passive=$(OMP_WAIT_POLICY=passive side_by_side --threads="$half")
ranks_default=$(two_ranks --threads="$cores")
ranks_passive=$(OMP_WAIT_POLICY=passive two_ranks --threads="$cores")
ranks_after=$(two_ranks)

echo "| tiny, $steps steps ($rank_steps for --nproc), $cores cores | $cores threads each, OpenMP's default wait | $cores threads each, OMP_WAIT_POLICY=active | $cores threads each, passive | $half thread(s) each, default wait | $half thread(s) each, passive |"
echo "|---|---|---|---|---|---|"
echo "| one folio alone | $alone ms | | | | |"
echo "| two folio processes side by side (ms each) | $pair_default | $pair_active | $pair_passive | $pair_half | $pair_half_passive |"
echo "| \`folio train --nproc 2\` (ms per step) | $ranks_default | | $ranks_passive | $ranks_after (the default now) | |"
