#!/usr/bin/env bash
# folio against PyTorch 2.x (PyPI, bench/torch2_peer.sh) on this CPU: the same model and threads,
# side by side in one run. Each round runs, one after the other: folio in fp32 and in bf16, and
# PyTorch's seed modules (eager) and nanoGPT-style model (fused qkv, SDPA) in its four modes: fp32
# eager, torch.compile, bf16 autocast, bf16 autocast + compile. Each entry keeps its lowest
# per-round figure, so a noisy moment on a shared machine hurts nobody; the speed-up is folio's
# best dtype against PyTorch's best mode. Prints the table of the README's "Performance on CPU" (every run: docs/performance_cpu.md):
#   bench/cpu_compare.sh [THREADS] [CONFIGS...]   (default: all cores; tiny baby shakespeare_char)
# ROUNDS=3; STAT=ms_per_step (each run's median step), ms_per_step_min (its fastest step), or
# cpu_ms_per_step (the median of the steps' CPU times, all threads: with THREADS=1 on a machine shared with
# other work, what the step costs on a core of its own). Needs ./build/folio.
# FOLIO_BEFORE=path/to/an/older/folio also times that binary in every round, beside ./build/folio,
# and prints a line per config with both and their ratio: a change measured side by side.
# AS_AVX2=1 holds both sides to AVX2 + FMA, as on an AVX2-only CPU (bench/hold_to_avx2.sh).
# PEER_MODES="eager compile" runs only those of PyTorch's four modes (the others read "not run"):
# held to AVX2, its bf16 modes take 20x its fp32 time, minutes a shakespeare_char step.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/hold_to_avx2.sh
threads="${1:-$(nproc)}"
shift || true
if [ $# -gt 0 ]; then configs=("$@"); else configs=(tiny baby shakespeare_char); fi
rounds="${ROUNDS:-3}"
stat="${STAT:-ms_per_step}"
folio=./build/folio
peer=bench/torch2_peer.sh
steps_for() { case "$1" in shakespeare_char) echo 3;; baby) echo 30;; *) echo 100;; esac; }
field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^,\"}]*\).*/\1/p"; }
lowest() { printf '%s\n' "$@" | sort -g | head -1; }
policies=""
modes=(eager compile bf16 bf16-compile)
read -r -a chosen_modes <<< "${PEER_MODES:-${modes[*]}}"
for mode in "${chosen_modes[@]}"; do
  [[ " ${modes[*]} " == *" $mode "* ]] || { echo "PEER_MODES: no mode '$mode' (modes: ${modes[*]})" >&2; exit 2; }
done
about=$($peer --about --threads "$threads")
torch_version=$(echo "$about" | field torch)
isa=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
      awk '/^avx2$/{a="AVX2"} /^avx512f$/{b="AVX-512"} /^avx512_bf16$/{c="AVX512-BF16"} /^amx_bf16$/{d="AMX"}
           END{s=a; if(b)s=s", "b; if(c)s=s", "c; if(d)s=s", "d; print s}')
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)
if [ "${AS_AVX2:-0}" = 1 ]; then
  isa="$isa; both sides held to AVX2 (AS_AVX2=1), PyTorch's capability: $(echo "$about" | field cpu_capability)"
fi
echo "| config | folio fp32 | folio bf16 | PyTorch seed modules | PyTorch fp32 eager | PyTorch compile | PyTorch bf16 | PyTorch bf16 + compile | folio best / PyTorch best | peak RSS folio / PyTorch best | PyTorch's least RSS |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for config in "${configs[@]}"; do
  steps=$(steps_for "$config")
  declare -A runs=() rss=()
  for _ in $(seq "$rounds"); do
    for dtype in fp32 bf16; do
      line=$($folio bench --config "$config" --threads "$threads" --steps "$steps" --warmup 2 --dtype "$dtype" 2>/dev/null)
      runs[folio_$dtype]+=" $(echo "$line" | field "$stat")"
      rss[folio_$dtype]=$(echo "$line" | field peak_rss_mib)
      before_backend=$(echo "$line" | field rss_before_backend_mib)
      policies+=" $(echo "$line" | field omp_wait_policy)"
      if [ -n "${FOLIO_BEFORE:-}" ]; then
        line=$("$FOLIO_BEFORE" bench --config "$config" --threads "$threads" --steps "$steps" --warmup 2 --dtype "$dtype" 2>/dev/null)
        runs[before_$dtype]+=" $(echo "$line" | field "$stat")"
        rss[before_$dtype]=$(echo "$line" | field peak_rss_mib)
      fi
    done
    line=$($peer --config "$config" --threads "$threads" --impl seed --steps "$steps" 2>/dev/null)
    runs[seed]+=" $(echo "$line" | field "$stat")"
    rss[seed]=$(echo "$line" | field peak_rss_mb)
    for mode in "${modes[@]}"; do
      if [[ " ${chosen_modes[*]} " != *" $mode "* ]]; then
        runs[$mode]+=" skip" rss[$mode]=nan
        continue
      fi
      # A mode that crashes (torch.compile aborted with "malloc(): unaligned tcache chunk detected"
      # on shakespeare_char here, 2026-11-26) is reported as failed, not the end of the table.
      line=$($peer --config "$config" --threads "$threads" --impl fused --mode "$mode" --steps "$steps" 2>/dev/null) ||
        line='{"ms_per_step": "nan", "ms_per_step_min": "nan", "cpu_ms_per_step": "nan", "peak_rss_mb": "nan"}'
      runs[$mode]+=" $(echo "$line" | field "$stat")"
      rss[$mode]=$(echo "$line" | field peak_rss_mb)
    done
  done
  python3 - "$config" "${runs[folio_fp32]}" "${runs[folio_bf16]}" "${runs[seed]}" "${runs[eager]}" \
    "${runs[compile]}" "${runs[bf16]}" "${runs[bf16-compile]}" "${rss[folio_fp32]}" "${rss[folio_bf16]}" \
    "${rss[seed]}" "${rss[eager]}" "${rss[compile]}" "${rss[bf16]}" "${rss[bf16-compile]}" <<'PY'
import sys
config, *cols = sys.argv[1:9]
nan = float("nan")
def lowest(runs):  # the fastest round that finished; nan when none did
    done = [v for v in map(float, runs.replace("skip", "nan").split()) if v == v]
    return min(done) if done else nan
best = [lowest(c) for c in cols]
skipped = [c.split() and all(r == "skip" for r in c.split()) for c in cols]
folio = min(v for v in best[0:2] if v == v)
torch = min(v for v in best[2:] if v == v)
names = ["seed", "fp32 eager", "compile", "bf16", "bf16 + compile"]
which = names[best[2:].index(torch)]
rss = [float(x) for x in sys.argv[9:16]]  # peak MiB of each column's last run
folio_rss, torch_rss = rss[best.index(folio)], rss[best.index(torch)]
# The fastest mode is not always PyTorch's leanest (bf16 eager can beat bf16 + compile by a few
# per cent with far more memory): the memory comparison names the least of any mode as well.
leanest = min((r, names[i]) for i, r in enumerate(rss[2:]) if r == r)
cells = " | ".join(f"{ms:.1f}" if ms == ms else "not run" if skip else "failed"
                   for ms, skip in zip(best, skipped))
print(f"| {config} | {cells} | {torch / folio:.2f}x (vs {which}) | {folio_rss:.0f} / {torch_rss:.0f} MiB "
      f"| {leanest[0]:.0f} MiB ({leanest[1]}) |")
print(f"<!-- {config} rounds (ms): " + "; ".join(c.strip() for c in cols) + " -->")
print(f"<!-- {config} peak RSS (MiB), last round: folio fp32, bf16, then PyTorch's modes: " +
      " ".join(f"{r:.0f}" for r in rss) + " -->")
PY
  # Of folio's peak, the program and its libraries (a build with CUDA loads its libraries even
  # for a CPU run); older binaries do not report it.
  [ -n "${before_backend:-}" ] && echo "<!-- $config: folio held ${before_backend%.*} MiB before its backend (program and libraries) -->"
  if [ -n "${FOLIO_BEFORE:-}" ]; then
    for dtype in fp32 bf16; do
      before=$(lowest ${runs[before_$dtype]}) after=$(lowest ${runs[folio_$dtype]})
      echo "<!-- $config $dtype: before $before ms ${rss[before_$dtype]} MiB, after $after ms" \
           "${rss[folio_$dtype]} MiB, before/after $(python3 -c "print(f'{$before/$after:.2f}')")x -->"
    done
  fi
  unset runs rss before_backend
done
# folio waits passively when the machine is busy as it starts (README, "Sharing the CPU"), which
# makes a small model's step several times slower: say so when any run did.
passive=$(echo "$policies" | tr ' ' '\n' | grep -c '^passive$' || true)
if [ "$passive" -gt 0 ]; then
  echo "<!-- folio found the machine busy and waited passively in $passive of its runs -->"
fi
echo
echo "ms per training step ($stat), lowest of $rounds alternating rounds, $threads threads;" \
     "PyTorch $torch_version (PyPI wheel: MKL + oneDNN); folio $(git rev-parse --short HEAD);" \
     "$cpu ($isa); $(date -u +%Y-%m-%d)"
