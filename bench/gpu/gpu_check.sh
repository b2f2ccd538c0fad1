#!/usr/bin/env bash
# Everything a GPU can check, in one call, on an H100/H200 machine with CUDA 13, cmake and
# PyTorch 2.x (no Debian -dev packages needed: run bench/gpu/prepare_gpu_carry.sh on the build
# machine first, so that .carry/ holds nlohmann-json, GoogleTest, cairo and tiny-Shakespeare).
#
#   bench/gpu/gpu_check.sh         build build-gpu/; every GPU test (ctest -L gpu: the CUDA ops
#                              against the CPU reference, fp32 and bf16; the model against the
#                              CPU, rerun and replayed as a CUDA graph; 50 training steps CPU
#                              against GPU; PyTorch 2.x on the same GPU); compute-sanitizer
#                              (memcheck, and racecheck on the tensor-core attention); folio bench
#                              and its ladder; the PyTorch peer. About 6-8 minutes.
#   bench/gpu/gpu_check.sh full    the seed's two full runs, 5000 steps of shakespeare_char and of
#                              nanogpt_char, with their times and final val losses.
#
# Logs go to $OUT when set (else build-gpu/gpu_check/); a table of results ends the output.
set -uo pipefail
cd "$(dirname "$0")/../.."
mode="${1:-quick}"
root="$PWD"
build="$root/build-gpu"
out="${OUT:-$build/gpu_check}"
mkdir -p "$out"
rows=()

# step NAME SECONDS COMMAND...: runs COMMAND with a time limit, its output in $out/NAME.log.
step() {
  local name="$1" limit="$2"
  shift 2
  local log="$out/${name// /_}.log" start=$SECONDS status
  echo "== $name" >&2
  timeout "$limit" "$@" >"$log" 2>&1
  case $? in
    0) status=ok ;;
    124) status="TIMEOUT (${limit}s)" ;;
    *) status=FAIL ;;
  esac
  rows+=("| $name | $status | $((SECONDS - start)) | $(summary "$name" "$log") |")
  tail -n 3 "$log" | sed 's/^/   /' >&2
}

field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^,\"}]*\).*/\1/p" | tail -n 1; }

summary() {
  local log="$2"
  case "$1" in
    "gpu tests")
      printf '%s; %s skipped' "$(grep -E "tests passed|tests failed" "$log" | tail -n 1)" \
        "$(grep -c '(Skipped)' "$log")" ;;
    "folio bench" | "folio bench, no graph" | "torch peer")
      printf '%s ms/step, %s tokens/s' "$(field ms_per_step <"$log")" "$(field tokens_per_s <"$log")" ;;
    sanitize*) grep -E "ERROR SUMMARY" "$log" | tail -n 1 ;;
    train*) grep -E "^step [0-9]+: train loss" "$log" | tail -n 1 ;;
    *) : ;;
  esac
}

# ---- what is there, and what .carry stands in for ----------------------------------------------------
data="${FOLIO_TEST_DATA:-}"
[ -z "$data" ] && [ -f .carry/input.txt ] && data="$root/.carry/input.txt"
[ -z "$data" ] && [ -f ../shared/data/tinyshakespeare/input.txt ] &&
  data="$(realpath ../shared/data/tinyshakespeare/input.txt)"
if [ -z "$data" ]; then
  echo "gpu_check: no tiny-Shakespeare: run bench/gpu/prepare_gpu_carry.sh, or set FOLIO_TEST_DATA" >&2
  exit 2
fi
python=$(command -v python3)
cmake_flags=(-DFOLIO_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DFOLIO_TEST_DATA="$data"
             -DFOLIO_GPU_PYTHON="$python" -DFOLIO_TORCH_PYTHON="$python")
[ -d .carry/nlohmann ] && cmake_flags+=(-DFOLIO_NLOHMANN_INCLUDE="$root/.carry")
if [ ! -f /usr/include/gtest/gtest.h ] && [ -d .carry/googletest ]; then
  cmake_flags+=(-DFOLIO_GOOGLETEST_SOURCE="$root/.carry/googletest")
fi
if ! pkg-config --exists cairo 2>/dev/null && [ -f .carry/cairo/cairo.cmake ]; then
  cmake_flags+=(-DCMAKE_PROJECT_folio_INCLUDE="$root/.carry/cairo/cairo.cmake")
  # The carried cairo loads where the machine has none of its own.
  ldconfig -p 2>/dev/null | grep -q 'libcairo\.so\.2 ' ||
    export LD_LIBRARY_PATH="$root/.carry/cairo/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
sanitizer=$(command -v compute-sanitizer || true)
for candidate in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
  [ -z "$sanitizer" ] && [ -x "$candidate" ] && sanitizer="$candidate"
done
folio="$build/folio"
rm -rf "$out/shakespeare_char" "$out/nanogpt_char" "$out/sanitize_train"  # runs start afresh

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  nvcc --version 2>/dev/null | tail -n 2 || /usr/local/cuda/bin/nvcc --version | tail -n 2
  "$python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  cmake --version | head -n 1
  echo "cmake flags: ${cmake_flags[*]}"
} >"$out/environment.log" 2>&1
cat "$out/environment.log" >&2

step "configure" 300 cmake -S . -B "$build" "${cmake_flags[@]}"
step "build" 600 cmake --build "$build" -j"$(nproc)"
if [ ! -x "$folio" ]; then
  printf '%s\n' "| step | status | seconds | result |" "|---|---|---|---|" "${rows[@]}"
  exit 1
fi

if [ "$mode" = full ]; then
  # The seed's runs as the README states them: 5000 steps each, evaluations included.
  step "train shakespeare_char" 580 "$folio" train --config shakespeare_char --device cuda \
    --data "$data" --out_dir "$out/shakespeare_char" --sample_tokens 300
  step "train nanogpt_char" 580 "$folio" train --config nanogpt_char --device cuda \
    --data "$data" --out_dir "$out/nanogpt_char" --sample_tokens 300
  printf '\n%s\n' "| run | status | seconds | last evaluation |" "|---|---|---|---|" "${rows[@]}"
  echo "targets: shakespeare_char val <= 1.60, nanogpt_char val <= 1.48; a 5000-step seed run < 60 s"
  exit 0
fi

step "gpu tests" 420 ctest --test-dir "$build" -L gpu -j 4 --output-on-failure --timeout 400
if [ -n "$sanitizer" ]; then
  step "sanitize memcheck train" 240 "$sanitizer" --tool memcheck --error-exitcode 1 \
    "$folio" train --config tiny --device cuda --data "$data" --out_dir "$out/sanitize_train" \
    --max_iters 4 --eval_interval 2 --eval_iters 2 --sample_tokens 20
  step "sanitize memcheck bench" 240 "$sanitizer" --tool memcheck --error-exitcode 1 \
    "$folio" bench --config shakespeare_char --device cuda --batch_size=4 --steps 2 --warmup 1
  step "sanitize memcheck ops" 300 "$sanitizer" --tool memcheck --error-exitcode 1 \
    "$build/tests/gpu/folio_gpu_tests" --gtest_filter='CudaOps.*:-CudaOps.SumOfSquares*'
  step "sanitize racecheck attention" 300 "$sanitizer" --tool racecheck --error-exitcode 1 \
    "$build/tests/gpu/folio_gpu_tests" --gtest_filter='CudaOps.TensorCore*:CudaOps.FlashAttentionInFp32'
else
  rows+=("| sanitize | SKIPPED | 0 | compute-sanitizer not found |")
fi
step "distributed on the GPU" 240 "$python" tests/gpu/compare_distributed.py "$folio" "$data" \
  "$out/distributed"
step "folio bench" 180 "$folio" bench --config shakespeare_char --device cuda --steps 50 --warmup 5
step "folio bench, no graph" 180 "$folio" bench --config shakespeare_char --device cuda \
  --steps 30 --warmup 5 --graph=false
step "ladder" 300 "$folio" bench --ladder --config shakespeare_char --device cuda --steps 20 \
  --warmup 3
step "torch peer" 300 "$python" bench/gpu/torch_gpu_peer.py --config shakespeare_char --steps 50 \
  --warmup 15

echo
sed -n '/^| rung/,$p' "$out/ladder.log"
echo
printf '%s\n' "| step | status | seconds | result |" "|---|---|---|---|" "${rows[@]}"
folio_ms=$(field ms_per_step <"$out/folio_bench.log")
torch_ms=$(field ms_per_step <"$out/torch_peer.log")
if [ -n "$folio_ms" ] && [ -n "$torch_ms" ]; then
  "$python" -c "f, t = $folio_ms, $torch_ms; print(f'\nshakespeare_char: folio {f:.2f} ms/step, PyTorch {t:.2f} ms/step: {t / f:.2f}x (targets: >= 3x, <= 4 ms/step)')"
fi
echo "logs: $out"
