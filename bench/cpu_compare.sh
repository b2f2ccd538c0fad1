#!/usr/bin/env bash
# folio against the PyTorch peer on this CPU, side by side in one run, same threads, same model.
# Each of ROUNDS rounds runs folio and both PyTorch variants one after the other; each keeps its
# best (lowest) median over the rounds, so a noisy moment on a shared machine hurts nobody.
# Prints a markdown table (README "Performance on CPU"). Usage:
#   bench/cpu_compare.sh [THREADS] [CONFIGS...]   (default: all cores; tiny baby shakespeare_char)
#   ROUNDS=3 by default.
set -euo pipefail
cd "$(dirname "$0")/.."
threads="${1:-$(nproc)}"
shift || true
if [ $# -gt 0 ]; then configs=("$@"); else configs=(tiny baby shakespeare_char); fi
rounds="${ROUNDS:-3}"
folio=./build/folio
python=/usr/bin/python3
steps_for() { case "$1" in shakespeare_char) echo 4;; baby) echo 50;; *) echo 200;; esac; }
field() { sed -n "s/.*\"$1\": *\([0-9.e+-]*\).*/\1/p"; }
lowest() { printf '%s\n' "$@" | sort -g | head -1; }
echo "| config | folio ms/step | PyTorch, seed modules | PyTorch, fused qkv | speed-up vs faster PyTorch | folio GFLOP/s |"
echo "|---|---|---|---|---|---|"
for config in "${configs[@]}"; do
  steps=$(steps_for "$config")
  f=(); s=(); u=(); g=()
  for _ in $(seq "$rounds"); do
    line=$($folio bench --config "$config" --threads "$threads" --steps "$steps" --warmup 2)
    f+=("$(echo "$line" | field ms_per_step)"); g+=("$(echo "$line" | field gflops)")
    s+=("$($python bench/torch_peer.py --config "$config" --threads "$threads" --impl seed --steps "$steps" | field ms_per_step)")
    u+=("$($python bench/torch_peer.py --config "$config" --threads "$threads" --impl fused --steps "$steps" | field ms_per_step)")
  done
  python3 - "$config" "$(lowest "${f[@]}")" "$(lowest "${s[@]}")" "$(lowest "${u[@]}")" \
    "$(printf '%s\n' "${g[@]}" | sort -g | tail -1)" "${f[*]}" "${s[*]}" "${u[*]}" <<'PY'
import sys
config, f, s, u, g = sys.argv[1], *map(float, sys.argv[2:6])
print(f"| {config} | {f:.1f} | {s:.1f} | {u:.1f} | {min(s, u) / f:.2f}x | {g:.0f} |")
print(f"<!-- {config} rounds: folio {sys.argv[6]}; seed {sys.argv[7]}; fused {sys.argv[8]} -->")
PY
done
echo
echo "threads: $threads of $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $rounds rounds, $(date -u +%Y-%m-%d)"
