#!/usr/bin/env bash
# Fuzzes the checkpoint reader and loader, the config parsers, the text path, tokenizer files,
# token files and Hugging Face config.json (tests/fuzz/)
# with libFuzzer, under AddressSanitizer and UndefinedBehaviorSanitizer, in a clang build of its
# own (build-fuzz/, or FOLIO_FUZZ_BUILD_DIR).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]    default: 25 s each for checkpoint config text
#                                                       tokenizer token_file hf_config
#
# Each target starts from its checked-in seeds (tests/fuzz/corpus/TARGET/) plus whatever earlier
# runs in this build found (BUILD/corpus/TARGET/). A crash, leak, sanitizer report or timeout
# stops the script with the input saved as BUILD/crashes/TARGET-*; replay it with
# `BUILD/tests/fuzz/fuzz_TARGET FILE`, and check it in under tests/fuzz/corpus/TARGET/ once fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-25}"
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(checkpoint config text tokenizer token_file hf_config)
build_dir="${FOLIO_FUZZ_BUILD_DIR:-build-fuzz}"

if ! command -v clang++ >/dev/null || ! compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null; then
  echo "fuzz: clang and libFuzzer are missing: run scripts/setup.sh (apt-get install clang libclang-rt-14-dev)" >&2
  exit 1
fi
mkdir -p "$build_dir"
if ! { CC=clang CXX=clang++ cmake -S . -B "$build_dir" -DFOLIO_FUZZ=ON -DFOLIO_CUDA=OFF \
         -DFOLIO_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       cmake --build "$build_dir" -j"$(nproc)" --target folio_fuzzers; } >"$build_dir/build.log" 2>&1; then
  tail -40 "$build_dir/build.log"
  echo "fuzz: the build failed (log: $build_dir/build.log)" >&2
  exit 1
fi

# detect_leaks: a leak is a finding too. The UBSan checks abort (-fno-sanitize-recover), so
# halt_on_error only makes the intent explicit.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
mkdir -p "$build_dir/crashes"
failed=0
passed=0
for target in "${targets[@]}"; do
  corpus="$build_dir/corpus/$target"
  log="$build_dir/fuzz_$target.log"
  mkdir -p "$corpus"
  status=0
  "$build_dir/tests/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=16384 -dict="tests/fuzz/$target.dict" -artifact_prefix="$build_dir/crashes/$target-" \
    -print_final_stats=1 "$corpus" "tests/fuzz/corpus/$target" >"$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  coverage=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
  if [ "$status" -ne 0 ]; then
    failed=$((failed + 1))
    echo "fuzz: $target FAILED (exit $status); the last lines of $log:"
    tail -40 "$log"
  else
    passed=$((passed + 1))
    echo "fuzz: $target: ${runs:-?} runs, ${speed:-?}/s, ${coverage:-?}, corpus $(ls "$corpus" | wc -l)"
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
