#!/usr/bin/env bash
# GPT-2 124M (preset gpt2) training steps on this CPU: folio (fp32, bf16) against PyTorch 2.x from
# PyPI (bench/torch2_peer.sh: nanoGPT-style model with SDPA attention) in its four modes (fp32
# eager, torch.compile, bf16 autocast, bf16 autocast + compile), the same threads, side by side in
# one run, on random tokens of GPT-2's 50257-token vocabulary (padded to 50304 rows in both).
# One micro-batch per step (grad_accum 1): a preset step of 524,288 tokens is 128 of them.
#   bench/gpt2_cpu_compare.sh [THREADS] [BATCH] [BLOCK]   (default: all cores, 1, 1024)
# STEPS=3 timed steps per run (median), ROUNDS=1. Prints a Markdown table with each run's peak RSS
# (the whole process: weights, AdamW moments, activations). Needs ./build/folio.
# PEER_MODES="eager compile" runs only those of PyTorch's four modes (the others read "not run"):
# on a CPU without native bf16 (AVX2 only) its bf16 modes take about 20x its fp32 time.
set -euo pipefail
cd "$(dirname "$0")/.."
threads="${1:-$(nproc)}"
batch="${2:-1}"
block="${3:-1024}"
steps="${STEPS:-3}"
rounds="${ROUNDS:-1}"
folio=./build/folio
peer=bench/torch2_peer.sh
vocab=50257
field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^,\"}]*\).*/\1/p"; }
lowest() { printf '%s\n' "$@" | sort -g | head -1; }
about=$($peer --about --threads "$threads")
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)
modes=(eager compile bf16 bf16-compile)
read -r -a chosen_modes <<< "${PEER_MODES:-${modes[*]}}"
for mode in "${chosen_modes[@]}"; do
  [[ " ${modes[*]} " == *" $mode "* ]] || { echo "PEER_MODES: no mode '$mode' (modes: ${modes[*]})" >&2; exit 2; }
done
declare -A ms=() rss=() failed=()
for _ in $(seq "$rounds"); do
  for dtype in fp32 bf16; do
    line=$($folio bench --config gpt2 --vocab_size $vocab --threads "$threads" --steps "$steps" \
           --warmup 1 --dtype "$dtype" --batch_size="$batch" --block_size="$block" --grad_accum=1)
    ms[folio $dtype]+=" $(echo "$line" | field ms_per_step)"
    rss[folio $dtype]=$(echo "$line" | field peak_rss_mib)
  done
  for mode in "${chosen_modes[@]}"; do
    if ! line=$($peer --config gpt2 --vocab_size $vocab --threads "$threads" --impl fused \
                --mode "$mode" --steps "$steps" --warmup 1 --batch_size "$batch" \
                --block_size "$block" 2>/dev/null); then
      failed[PyTorch $mode]=1  # torch.compile has died with SIGSEGV on some CPUs
      continue
    fi
    ms[PyTorch $mode]+=" $(echo "$line" | field ms_per_step)"
    rss[PyTorch $mode]=$(echo "$line" | field peak_rss_mb)
  done
done
echo "| gpt2 (124M), B=$batch, T=$block | ms/step | tokens/s | peak RSS (MiB) |"
echo "|---|---|---|---|"
for run in "folio fp32" "folio bf16" "PyTorch eager" "PyTorch compile" "PyTorch bf16" "PyTorch bf16-compile"; do
  if [ -z "${ms[$run]:-}" ]; then
    if [ -n "${failed[$run]:-}" ]; then echo "| $run | failed | | |"; else echo "| $run | not run | | |"; fi
    continue
  fi
  best=$(lowest ${ms[$run]})
  printf '| %s | %.0f | %.0f | %.0f |\n' "$run" "$best" \
    "$(echo "$batch * $block * 1000 / $best" | bc -l)" "${rss[$run]}"
done
echo
echo "$threads threads, $steps timed steps per run (median), lowest of $rounds rounds;" \
     "PyTorch $(echo "$about" | field torch); folio $(git rev-parse --short HEAD); $cpu;" \
     "$(date -u +%Y-%m-%d)"
