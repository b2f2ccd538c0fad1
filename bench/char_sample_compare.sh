#!/usr/bin/env bash
# Sampling a character-level preset past its context on this CPU: `folio sample` (fp32 and bf16)
# against the seed's generate() on PyTorch 2.x from PyPI (bench/torch_peer.py --sample: the
# context cropped to block_size and recomputed whole for every token, the seed's per-head modules
# and the fused model in each of its four modes), side by side, rounds alternating. Both start
# from a prompt of block_size characters, so that every new token recomputes a whole window on
# both sides: within the context folio keeps a key/value cache and the seed does not, which a
# shorter prompt would count in folio's favour.
#   bench/char_sample_compare.sh [THREADS] [NEW_TOKENS] [CONFIG]  (default: all cores, 200,
#                                                                   shakespeare_char)
# ROUNDS=2 (each entry keeps its fastest round). Prints a Markdown table of tokens/s. The weights
# are one step from random on both sides (speed alone: the texts are not compared). Needs
# ./build/folio and the venv of bench/torch2_peer.sh (made the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
threads="${1:-$(nproc)}"
new_tokens="${2:-200}"
config="${3:-shakespeare_char}"
rounds="${ROUNDS:-2}"
folio=./build/folio
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data=../shared/data/tinyshakespeare/input.txt
[ -f "$data" ] || data=data/tinyshakespeare/input.txt
$folio train --config "$config" --data "$data" --out_dir "$work/run" --max_iters 1 \
  --eval_interval 1 --eval_iters 1 --batch_size 1 --threads "$threads" >/dev/null 2>&1
block_size=$(sed -n 's/^block_size *= *\([0-9]*\).*/\1/p' "configs/$config.conf")
head -c "$block_size" "$data" >"$work/prompt.txt"  # one byte a character in tiny-Shakespeare
field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^,\"}]*\).*/\1/p"; }
highest() { printf '%s\n' "$@" | sort -g | tail -1; }
declare -A rate=()
runs=("folio fp32" "folio bf16")
for impl in seed fused; do
  for mode in eager compile bf16 bf16-compile; do runs+=("PyTorch $impl $mode"); done
done
for _ in $(seq "$rounds"); do
  for dtype in fp32 bf16; do
    $folio sample --ckpt "$work/run/ckpt.safetensors" --prompt_file "$work/prompt.txt" \
      --max_new_tokens "$new_tokens" --threads "$threads" --dtype "$dtype" >/dev/null 2>"$work/err"
    # "sampled N tokens in S s: R tokens/s"
    rate[folio $dtype]+=" $(grep '^sampled' "$work/err" | awk '{print $(NF-1)}')"
  done
  for impl in seed fused; do
    for mode in eager compile bf16 bf16-compile; do
      line=$(bench/torch2_peer.sh --config "$config" --threads "$threads" --impl "$impl" \
             --mode "$mode" --sample "$new_tokens" 2>/dev/null || echo '{"tokens_per_s": 0}')
      rate[PyTorch $impl $mode]+=" $(echo "$line" | field tokens_per_s)"
    done
  done
done
best_peer=0
best_folio=0
echo "| $config, $new_tokens tokens past a $block_size-character prompt, $threads threads | tokens/s |"
echo "|---|---|"
for run in "${runs[@]}"; do
  r=$(highest ${rate[$run]})
  printf '| %s | %.1f |\n' "$run" "$r"
  case "$run" in
    folio*) best_folio=$(highest "$best_folio" "$r") ;;
    *) best_peer=$(highest "$best_peer" "$r") ;;
  esac
done
echo
awk -v f="$best_folio" -v p="$best_peer" 'BEGIN { printf "folio best / PyTorch best: %.2fx\n", f / p }'
version=$(bench/torch2_peer.sh --about --threads 1 | field torch)
echo "fastest of $rounds rounds; PyTorch $version; folio $(git rev-parse --short HEAD);" \
     "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%Y-%m-%d)"
