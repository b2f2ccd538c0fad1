#!/usr/bin/env bash
# Everything a GPU can check, in calls of at most about 8 minutes each (the device tool's limit
# is 10), on an H100/H200 machine with CUDA 13, cmake and PyTorch 2.x. It needs no Debian -dev
# packages: run bench/gpu/prepare_gpu_carry.sh on the build machine first, so that .carry/ holds
# nlohmann-json, GoogleTest, cairo and tiny-Shakespeare, and carry .carry along.
#
# A session's device time is 15 minutes in all, starts included. Seen on an H200 on 2026-11-28,
# each call right after the last on the warm machine: a fresh start and `tests` 404 s held (the
# build 70 s, the `gpu` label 144 s, two torch.compile peers 73 s, ncu 19 s, racecheck 31 s; 371
# s of command), then `full` 285 s (the seed run 91 s, nanogpt_char 60 s, GPT-2 and its two peers
# 91 s): 697 s held, 203 s left, too few for another start. So:
# `FOLIO_GPU_BUDGET=400 bench/gpu/gpu_check.sh tests` (timeout 440), then at once
# `FOLIO_GPU_BUDGET=440 ... full` (FOLIO_GPU_BUDGET: the seconds for one mode, default 470; a mode
# cuts its last steps to fit), and give the machine back (give_back) at once after the last call:
# its idle 30 s count too, and a start needs 4 minutes left. `sanitize` (133 s, clean on the
# first session of 2026-11-27) fits only a session that skips `full`.
#
#   bench/gpu/gpu_check.sh tests      build build-gpu/; every GPU test (ctest -L gpu: the CUDA ops
#                                     against the CPU reference, fp32 and bf16; the model against
#                                     the CPU, a bf16 loss curve against fp32, reruns and CUDA-graph
#                                     replay; 50 training steps CPU against GPU; PyTorch 2.x on the
#                                     same GPU); folio bench with the defaults, with the
#                                     gradients products alone read written in fp32 too
#                                     (FOLIO_CUDA_GRADIENT_COPIES=both), with the attention's
#                                     fragments by ldmatrix (FOLIO_ATTENTION_FRAGMENTS), with
#                                     ReLU's backward in the products (FOLIO_CUDA_RELU_BACKWARD),
#                                     with attention's dropout masks kept as bits
#                                     (FOLIO_ATTENTION_DROPOUT_MASKS), with all three, and its per-op
#                                     profile; the PyTorch 2.x peer,
#                                     in torch.compile's default mode and its CUDA-graph mode
#                                     (reduce-overhead); last, as the budget allows, each kernel's
#                                     time per step by ncu (bench/gpu/ncu_kernel_table.py),
#                                     racecheck on the register attention and partial sums,
#                                     memcheck on the dropout masks' bits, and ncu's stall reasons for the register attention kernels, their
#                                     fragments by words (the default) and by ldmatrix.
#   bench/gpu/gpu_check.sh sanitize   compute-sanitizer: memcheck on a short train, bench and the op
#                                     tests, racecheck on every attention test (the tensor-core
#                                     ones included); kill -9 and resume on the GPU, bit-identical;
#                                     data parallelism on the GPU (NCCL with one rank, two ranks
#                                     sharing it over Gloo, and MPI when built in).
#   bench/gpu/gpu_check.sh quick      the re-check of one change in a lease's last minutes: builds
#                                     folio and folio_gpu_tests only; the GPU tests that match
#                                     FOLIO_GPU_FILTER (a gtest filter, default all), folio bench
#                                     with --profile, the PyTorch 2.x peer, then 50 training steps
#                                     CPU against GPU if the budget leaves time.
#   bench/gpu/gpu_check.sh full       the seed's two 5000-step runs (shakespeare_char, nanogpt_char)
#                                     with their times and final losses, the first one's
#                                     checkpoint evaluated by folio on the CPU and by PyTorch and
#                                     sampled from on the GPU (tokens/s);
#                                     GPT-2 124M, folio bench (and its per-op profile) beside the
#                                     PyTorch peer; the ladder.
#
# Each call builds first (a no-op when build-gpu/ is already built: a machine still warm from the
# last call keeps it; a fresh one rebuilds, for sm_90 only unless FOLIO_CUDA_ARCHS says otherwise)
# and leaves exactly two files in $OUT (or, where OUT is unset, in build-gpu/gpu_check_out/):
# MODE-logs.tar.gz, every step's log, and MODE-summary.md, the table of results that also ends
# the output. FOLIO_REQUIRE_GPU=1 is set for every step: a GPU test that finds no GPU fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
mode="${1:-tests}"
case "$mode" in
  tests | sanitize | quick | full) ;;
  *) echo "usage: bench/gpu/gpu_check.sh tests|sanitize|quick|full" >&2; exit 2 ;;
esac
root="$PWD"
build="$root/build-gpu"
out="${OUT:-$build/gpu_check_out}"
logs="$build/gpu_check_logs/$mode"  # tarred into $out at the end
rm -rf "$logs"
mkdir -p "$logs" "$out"
export FOLIO_REQUIRE_GPU=1
budget="${FOLIO_GPU_BUDGET:-470}"  # seconds for the whole call, the build included; steps are
                                  # cut to what is left
rows=()
extra=""  # lines under the table

# step NAME SECONDS COMMAND...: runs COMMAND with a time limit (its own, or what is left of the
# call's budget), its output in $logs/NAME.log.
step() {
  local name="$1" limit="$2"
  shift 2
  local log="$logs/${name// /_}.log" start=$SECONDS status
  local left=$((budget - SECONDS))
  if [ "$left" -lt 10 ]; then
    rows+=("| $name | NOT RUN | 0 | the call's ${budget} s were spent |")
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name (up to ${limit} s)" >&2
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
      [ "$mode" = quick ] && { grep -E "^\[  (PASSED|FAILED)  \]" "$log" | tr '\n' ' '; return; }
      printf '%s; %s skipped' "$(grep -E "tests passed|tests failed" "$log" | tail -n 1)" \
        "$(grep -c '(Skipped)' "$log")"
      # the failed tests by name, so that the summary alone says where to look
      grep -E '^[[:space:]]*[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception|Not Run)\)' \
        "$log" | sed -E 's/^[[:space:]]*[0-9]+ - //' | tr '\n' ';' | sed 's/^/; failed: /' ;;
    "folio bench"* | "torch peer"*)
      printf '%s ms/step, %s tokens/s' "$(field ms_per_step <"$log")" "$(field tokens_per_s <"$log")" ;;
    sanitize*) grep -E "ERROR SUMMARY" "$log" | tail -n 1 ;;
    "gpu checkpoint"*) grep -oE '"status": "[a-zA-Z]+"|"worst_relative_difference": [0-9.e-]+' "$log" | tr '\n' ' ' ;;
    "resume on the GPU") grep -E "kills|FAIL" "$log" | tr '\n' ' ' ;;
    "train cpu against cuda") grep -oE '"config": "[a-z_]+", "steps": [0-9]+, "status": "[A-Z a-z]+", "worst_relative_difference": [0-9.e-]+' "$log" | tr '\n' ' ' ;;
    train*) grep -E "^step [0-9]+: train loss" "$log" | tail -n 1 ;;
    "sample on the gpu") grep -E "^sampled" "$log" | tail -n 1 ;;
    distributed*) grep -E "^FAIL|left out" "$log" | head -n 2 | tr '\n' ' ' ;;
    *) : ;;
  esac
}

# The two files this call leaves, and the table at the end of the output.
finish() {
  {
    echo "# gpu_check.sh $mode"
    echo
    sed 's/^/    /' "$logs/environment.log"
    echo
    printf '%s\n' "| step | status | seconds | result |" "|---|---|---|---|" "${rows[@]}"
    [ -f "$logs/ladder.log" ] && { echo; sed -n '/^| rung/,$p' "$logs/ladder.log"; }
    [ -f "$logs/folio_bench_profile.log" ] &&
      { echo; sed -n '/^| op /,$p' "$logs/folio_bench_profile.log"; }
    [ -f "$logs/folio_bench_gpt2_profile.log" ] &&
      { echo; echo "gpt2:"; sed -n '/^| op /,$p' "$logs/folio_bench_gpt2_profile.log"; }
    for variant in staged ldmatrix; do
      [ -f "$logs/ncu_kernels_$variant.md" ] &&
        { echo; echo "ncu, attention kernels $variant:"; cat "$logs/ncu_kernels_$variant.md"; }
    done
    [ -n "${extra:-}" ] && printf '\n%s\n' "$extra"
  } >"$out/$mode-summary.md"
  tar -czf "$out/$mode-logs.tar.gz" -C "$logs" .
  echo
  cat "$out/$mode-summary.md"
  echo "files: $out/$mode-summary.md, $out/$mode-logs.tar.gz"
  # Failed: any step not ok.
  grep -qv '| ok |' < <(printf '%s\n' "${rows[@]}") && exit 1
  exit 0
}

# compare_with_peer LABEL FOLIO_STEP PEER_STEP...: a speed-up line under the table, folio bench's
# ms/step (the step's log) against the fastest of the PyTorch peer's runs in this call.
compare_with_peer() {
  local label="$1" folio_ms torch_ms="" ms peer
  folio_ms=$(field ms_per_step 2>/dev/null <"$logs/${2// /_}.log")
  shift 2
  for peer in "$@"; do
    ms=$(field ms_per_step 2>/dev/null <"$logs/${peer// /_}.log")
    if [ -n "$ms" ] && { [ -z "$torch_ms" ] || awk "BEGIN { exit !($ms < $torch_ms) }"; }; then
      torch_ms=$ms
    fi
  done
  if [ -n "$folio_ms" ] && [ -n "$torch_ms" ]; then
    extra+=$("$python" -c "f, t = $folio_ms, $torch_ms; print(f'$label: folio {f:.2f} ms/step, PyTorch (its fastest run here) {t:.2f} ms/step: {t / f:.2f}x')")$'\n'
  fi
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
             -DFOLIO_CUDA_ARCHS="${FOLIO_CUDA_ARCHS:-90}"
             -DFOLIO_GPU_PYTHON="$python" -DFOLIO_TORCH_PYTHON="$python")
[ -d .carry/nlohmann ] && cmake_flags+=(-DFOLIO_NLOHMANN_INCLUDE="$root/.carry")
if [ ! -f /usr/include/gtest/gtest.h ] && [ -d .carry/googletest ]; then
  cmake_flags+=(-DFOLIO_GOOGLETEST_SOURCE="$root/.carry/googletest")
fi
if ! pkg-config --exists cairo libpcre2-8 2>/dev/null && [ -f .carry/cairo/cairo.cmake ]; then
  # cairo.cmake stands in for pkg-config's cairo and PCRE2 (both carried).
  cmake_flags+=(-DCMAKE_PROJECT_folio_INCLUDE="$root/.carry/cairo/cairo.cmake")
  export LD_LIBRARY_PATH="$root/.carry/pcre2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # The carried cairo loads where the machine has none of its own.
  grep -q 'libcairo\.so\.2 ' <<<"$(ldconfig -p 2>/dev/null)" ||
    export LD_LIBRARY_PATH="$root/.carry/cairo/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# OpenSSL's headers and Gloo, where the machine has no -dev packages.
if [ ! -f /usr/include/openssl/sha.h ] && [ -d .carry/openssl ]; then
  cmake_flags+=(-DOPENSSL_ROOT_DIR="$root/.carry/openssl")
  export LD_LIBRARY_PATH="$root/.carry/openssl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ ! -d /usr/include/gloo ] && [ -f .carry/gloo/lib/libgloo.so ]; then
  cmake_flags+=(-DFOLIO_GLOO_INCLUDE="$root/.carry/gloo/include"
                -DFOLIO_GLOO_LIBRARY="$root/.carry/gloo/lib/libgloo.so")
  export LD_LIBRARY_PATH="$root/.carry/gloo/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
sanitizer=$(command -v compute-sanitizer || true)
for candidate in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
  [ -z "$sanitizer" ] && [ -x "$candidate" ] && sanitizer="$candidate"
done
ncu=$(command -v ncu || true)
for candidate in /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
  [ -z "$ncu" ] && [ -x "$candidate" ] && ncu="$candidate"
done
folio="$build/folio"
# the attention kernels with their scores in registers (attention_registers.cu) and their loads
# direct, both sides, and the WMMA ones (attention_flash_bf16.cu) both sides; the default is in
# registers with the loads staged by cp.async, both sides (cuda_backend.cu)
ldmatrix_fragments=(env FOLIO_ATTENTION_FRAGMENTS=ldmatrix)
# FOLIO_ATTENTION_FRAGMENTS for an ncu variant: "staged" (the default kernels) reads by words
fragments_of() { [ "$1" = ldmatrix ] && echo ldmatrix || echo words; }
gpu_tests="$build/tests/gpu/folio_gpu_tests"

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  nvcc --version 2>/dev/null | tail -n 2 || /usr/local/cuda/bin/nvcc --version | tail -n 2
  "$python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
  cmake --version | head -n 1
  echo "mpirun: $(command -v mpirun || echo none)"
  echo "cmake flags: ${cmake_flags[*]}"
} >"$logs/environment.log" 2>&1
cat "$logs/environment.log" >&2

step "configure" 120 cmake -S . -B "$build" "${cmake_flags[@]}"
# What the build has: NCCL and MPI found or not (a missing one leaves its paths out, said here).
grep -E "folio: (CUDA|MPI|NCCL)" "$logs/configure.log" >>"$logs/environment.log"
# Only what this mode runs (the CPU-only tools and tests would double the build on a fresh machine):
# folio, and for `tests`/`sanitize` the executables that hold GPU-labelled tests.
targets=(folio)
[ "$mode" = quick ] && targets+=(folio_gpu_tests)
if [ "$mode" = tests ] || [ "$mode" = sanitize ]; then
  targets+=(folio_unit_tests folio_gpu_tests folio_torch_dump)
  # (The target list is read whole before grep looks at it: `| grep -q` under pipefail closed
  # the pipe early, failed the pipeline, and left the NCCL test unbuilt and unrun on 2026-11-27.)
  help=$(cmake --build "$build" --target help 2>/dev/null)
  grep -q folio_distributed_tests <<<"$help" && targets+=(folio_distributed_tests)
fi
step "build" 400 cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
# The CUDA module (libfolio_cuda.so, loaded by folio for a GPU run): what it holds, or why it fails.
{ [ -x "$folio" ] && "$folio" --version; } >>"$logs/environment.log" 2>&1 || true
if [ ! -x "$folio" ] || { [ "$mode" != full ] && [ ! -x "$gpu_tests" ]; }; then
  finish
fi

case "$mode" in
  tests)
    step "gpu tests" 240 ctest --test-dir "$build" -L gpu --no-tests=error -j 4 \
      --output-on-failure --timeout 200
    # A test that was never built is not a pass: with NCCL built in, the label must have run the
    # NCCL communicator's own test.
    if grep -q "NCCL communicator ON" "$logs/configure.log" &&
      ! grep -q "NcclCommunicatorTest" "$logs/gpu_tests.log"; then
      rows+=("| nccl communicator test | FAIL | 0 | NCCL is built in, but ctest -L gpu ran no NcclCommunicatorTest |")
    fi
    step "folio bench" 30 "$folio" bench --config shakespeare_char --device cuda --steps 50 \
      --warmup 5
    # (the rows measured on 2026-11-28 and settled are gone, to fit the budget: without the graph
    # 7.66 ms, attention wmma 8.15, registers with direct loads 7.37, ReLU's output in fp32 7.37;
    # docs/gpu.md)
    # the gradients that products alone read (d_fc, the logits') written in fp32 beside their bf16
    # copy, as before 2026-11-28 (FOLIO_CUDA_GRADIENT_COPIES; the default writes the copy alone)
    step "folio bench, gradient copies both" 30 env FOLIO_CUDA_GRADIENT_COPIES=both "$folio" \
      bench --config shakespeare_char --device cuda --steps 50 --warmup 5
    # the register attention kernels reading their fragments by ldmatrix (FOLIO_ATTENTION_FRAGMENTS;
    # the default reads them by words; the same registers, so the same results)
    step "folio bench, fragments by ldmatrix" 30 "${ldmatrix_fragments[@]}" "$folio" bench \
      --config shakespeare_char --device cuda --steps 50 --warmup 5
    # ReLU's backward in fc2's product (its mask written beside fc; FOLIO_CUDA_RELU_BACKWARD; the
    # default runs it as a pass)
    step "folio bench, relu backward in the products" 30 env FOLIO_CUDA_RELU_BACKWARD=epilogue \
      "$folio" bench --config shakespeare_char --device cuda --steps 50 --warmup 5
    # attention's dropout masks kept as bits by the forward kernel for the backward kernels, which
    # then draw nothing (FOLIO_ATTENTION_DROPOUT_MASKS; the default draws them again), and the
    # three new options at once (the row of ldmatrix and the ReLU epilogue together made room)
    step "folio bench, dropout masks as bits" 30 env FOLIO_ATTENTION_DROPOUT_MASKS=bits \
      "$folio" bench --config shakespeare_char --device cuda --steps 50 --warmup 5
    step "folio bench, bits, ldmatrix and relu backward in the products" 30 \
      "${ldmatrix_fragments[@]}" FOLIO_CUDA_RELU_BACKWARD=epilogue \
      FOLIO_ATTENTION_DROPOUT_MASKS=bits "$folio" bench --config shakespeare_char --device cuda \
      --steps 50 --warmup 5
    # where the step's time goes, op by op (each op waited for), for the next speed work
    step "folio bench profile" 30 "$folio" bench --config shakespeare_char --device cuda \
      --steps 20 --warmup 3 --profile --graph=false
    step "torch peer" 90 "$python" bench/gpu/torch_gpu_peer.py --config shakespeare_char \
      --steps 50 --warmup 15
    # torch.compile replaying CUDA graphs, as folio bench does: the stronger mode where Python's
    # launches are what a step waits on
    step "torch peer graphs" 90 "$python" bench/gpu/torch_gpu_peer.py --config shakespeare_char \
      --steps 50 --warmup 15 --compile_mode reduce-overhead
    compare_with_peer "shakespeare_char (targets: >= 3x, <= 4 ms/step)" "folio bench" \
      "torch peer" "torch peer graphs"
    # Each kernel's time per step, by ncu (the GPU's own timer per kernel, no hardware counters),
    # for the default attention kernels (staged, fragments by words) and with their fragments by
    # ldmatrix: last, as the budget allows.
    if [ -n "$ncu" ]; then
      for variant in staged ldmatrix; do
        # one warm-up step and one timed: ncu serialises and times every kernel (about 330 a step)
        step "ncu kernels $variant" 120 env FOLIO_ATTENTION_FRAGMENTS=$(fragments_of $variant) \
          "$ncu" --clock-control none \
          --print-kernel-base function --csv --metrics gpu__time_duration.sum "$folio" bench \
          --config shakespeare_char --device cuda --steps 1 --warmup 1 --graph=false
        [ -f "$logs/ncu_kernels_$variant.log" ] && "$python" bench/gpu/ncu_kernel_table.py \
          "$logs/ncu_kernels_$variant.log" 2 >"$logs/ncu_kernels_$variant.md" 2>&1
      done
    else
      rows+=("| ncu kernels | FAIL | 0 | ncu not found (looked on PATH, in /usr/local/cuda and /opt/nvidia) |")
    fi
    # racecheck on the kernels newest to a GPU, with what the budget leaves (`sanitize`, which
    # racechecks every attention test, has not fitted beside `full` in a session): the register
    # attention kernels, their loads direct and staged (the default: cp.async into shared memory,
    # FlashAttentionInRegistersWithStagedLoads), and the partial sums' shared-memory adds
    if [ -n "$sanitizer" ]; then
      step "sanitize racecheck newest kernels" 90 "$sanitizer" --tool racecheck --error-exitcode 1 \
        "$gpu_tests" \
        --gtest_filter='CudaOps.FlashAttention*InRegisters*:CudaOps.FlashAttentionFragmentsByLdmatrix:CudaOps.PartialSums*'
    fi
    # memcheck on the kernels that keep and read the dropout masks as bits (global loads and
    # stores at indices computed from rows and keys; written without a GPU)
    if [ -n "$sanitizer" ]; then
      step "sanitize memcheck dropout mask bits" 60 "$sanitizer" --tool memcheck --error-exitcode 1 \
        "$gpu_tests" --gtest_filter='CudaOps.AttentionDropoutMasksKeptAsBits'
    fi
    # Why the register attention kernels take the time they do (2026-11-28: 2.3 of
    # shakespeare_char's 7.2 ms, 2-3 warps a scheduler, none eligible in 65-74% of cycles), their
    # fragments by words and by ldmatrix: ncu's stall reasons, issue slots and occupancy for the
    # timed step's last forward and the backward's first two kernels (matching launches 24-26:
    # the warm-up step and the timed step's first five forwards are skipped).
    if [ -n "$ncu" ]; then
      for variant in staged ldmatrix; do
        step "ncu attention stalls $variant" 60 env FOLIO_ATTENTION_FRAGMENTS=$(fragments_of $variant) \
          "$ncu" --clock-control none \
          --kernel-name regex:'flash_(forward|backward_keys|backward_queries)_registers' \
          --launch-skip 23 --launch-count 3 --section SpeedOfLight --section WarpStateStats \
          --section SchedulerStats --section Occupancy --section LaunchStats "$folio" bench \
          --config shakespeare_char --device cuda --steps 1 --warmup 1 --graph=false
      done
    fi
    ;;
  sanitize)
    if [ -n "$sanitizer" ]; then
      rm -rf "$logs/sanitize_train"
      step "sanitize memcheck train" 90 "$sanitizer" --tool memcheck --error-exitcode 1 \
        "$folio" train --config tiny --device cuda --data "$data" \
        --out_dir "$build/gpu_check_sanitize_train" --max_iters 4 --eval_interval 2 \
        --eval_iters 2 --sample_tokens 20
      step "sanitize memcheck bench" 90 "$sanitizer" --tool memcheck --error-exitcode 1 \
        "$folio" bench --config shakespeare_char --device cuda --batch_size=4 --steps 2 --warmup 1
      step "sanitize memcheck ops" 120 "$sanitizer" --tool memcheck --error-exitcode 1 \
        "$gpu_tests" --gtest_filter='CudaOps.*:-CudaOps.SumOfSquares*'
      # Every attention test: the tensor-core kernels (FlashAttentionOnTensorCores,
      # TensorCoreAttention*), the fp32 flash kernels and the unfused path.
      step "sanitize racecheck attention" 150 "$sanitizer" --tool racecheck --error-exitcode 1 \
        "$gpu_tests" --gtest_filter='CudaOps.*Attention*'
    else
      rows+=("| sanitize | FAIL | 0 | compute-sanitizer not found (looked on PATH and in /usr/local/cuda) |")
    fi
    # kill -9 at random moments (inside saves too), resume: the same bits as a run never stopped
    step "resume on the GPU" 180 env FOLIO_TEST_DEVICE=cuda "$python" \
      tests/distributed/test_resume.py "$folio" "$data" "$build/gpu_check_resume" 5
    step "distributed on the GPU" 120 "$python" tests/gpu/compare_distributed.py "$folio" "$data" \
      "$build/gpu_check_distributed"
    ;;
  quick)
    step "gpu tests" 120 "$gpu_tests" --gtest_filter="${FOLIO_GPU_FILTER:-*}"
    step "folio bench" 30 "$folio" bench --config shakespeare_char --device cuda --steps 50 \
      --warmup 5
    step "folio bench profile" 30 "$folio" bench --config shakespeare_char --device cuda \
      --steps 20 --warmup 3 --profile --graph=false
    step "torch peer" 90 "$python" bench/gpu/torch_gpu_peer.py --config shakespeare_char \
      --steps 50 --warmup 15
    compare_with_peer "shakespeare_char" "folio bench" "torch peer"
    step "train cpu against cuda" 120 "$python" tests/gpu/compare_training.py "$folio" "$data" \
      "$build/gpu_check_training"
    ;;
  full)
    # The seed's runs as the README states them: 5000 steps each, evaluations included (from
    # scratch: a warm machine keeps the last call's runs)
    rm -rf "$build/gpu_check_shakespeare_char" "$build/gpu_check_nanogpt_char"
    step "train shakespeare_char" 180 "$folio" train --config shakespeare_char --device cuda \
      --data "$data" --out_dir "$build/gpu_check_shakespeare_char" --sample_tokens 300
    # What the GPU wrote loads in folio on the CPU and in PyTorch, with the same losses
    step "gpu checkpoint on the cpu and in torch" 120 "$python" tests/gpu/checkpoint_from_gpu.py \
      "$folio" "$data" "$build/gpu_check_shakespeare_char/ckpt.safetensors"
    # Sampling from it on the GPU (never timed before 2026-11-28): 2000 characters, the key/value
    # cache within the 256-character block, the seed's cropped recomputation past it
    step "sample on the gpu" 60 "$folio" sample --device cuda --max_new_tokens 2000 --seed 7 \
      --ckpt "$build/gpu_check_shakespeare_char/ckpt.safetensors"
    step "train nanogpt_char" 180 "$folio" train --config nanogpt_char --device cuda \
      --data "$data" --out_dir "$build/gpu_check_nanogpt_char" --sample_tokens 300
    # GPT-2 124M, one micro-batch of 16 x 1024 tokens, GPT-2's vocabulary (padded as the preset
    # says, in both)
    step "folio bench gpt2" 60 "$folio" bench --config gpt2 --device cuda --vocab_size 50257 \
      --batch_size=16 --block_size=1024 --grad_accum=1 --steps 20 --warmup 3
    # (attention wmma, 60.16 ms, and registers with direct loads, 50.17, were measured on
    # 2026-11-28 and are settled: docs/gpu.md)
    # the logits' and GELU's gradients written in fp32 beside their bf16 copies, as before
    step "folio bench gpt2, gradient copies both" 60 env FOLIO_CUDA_GRADIENT_COPIES=both \
      "$folio" bench --config gpt2 --device cuda \
      --vocab_size 50257 --batch_size=16 --block_size=1024 --grad_accum=1 --steps 20 --warmup 3
    # the register attention's fragments by ldmatrix (at T = 1024 attention is a larger share)
    step "folio bench gpt2, fragments by ldmatrix" 60 "${ldmatrix_fragments[@]}" "$folio" bench \
      --config gpt2 --device cuda --vocab_size 50257 --batch_size=16 --block_size=1024 \
      --grad_accum=1 --steps 20 --warmup 3
    # where GPT-2's step goes op by op (each op waited for): 0.69x PyTorch on 2026-11-28, with no
    # profile of it yet
    step "folio bench gpt2 profile" 60 "$folio" bench --config gpt2 --device cuda \
      --vocab_size 50257 --batch_size=16 --block_size=1024 --grad_accum=1 --steps 5 --warmup 2 \
      --profile --graph=false
    step "torch peer gpt2" 120 "$python" bench/gpu/torch_gpu_peer.py --config gpt2 \
      --vocab_size 50257 --batch_size 16 --block_size 1024 --steps 20 --warmup 5
    # and replaying CUDA graphs, as on shakespeare_char, where that mode was PyTorch's faster
    step "torch peer gpt2 graphs" 120 "$python" bench/gpu/torch_gpu_peer.py --config gpt2 \
      --vocab_size 50257 --batch_size 16 --block_size 1024 --steps 20 --warmup 5 \
      --compile_mode reduce-overhead
    compare_with_peer "gpt2 124M, B 16, T 1024" "folio bench gpt2" "torch peer gpt2" \
      "torch peer gpt2 graphs"
    step "ladder" 120 "$folio" bench --ladder --config shakespeare_char --device cuda --steps 20 \
      --warmup 3
    extra+="targets: shakespeare_char val <= 1.60 (seed 1.5677), nanogpt_char val <= 1.48; a 5000-step seed run < 60 s"
    ;;
esac
finish
