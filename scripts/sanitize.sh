#!/usr/bin/env bash
# The whole test suite (ctest: unit tests, the PyTorch comparisons, the CLI tests, which run the
# sanitized folio binary) built with AddressSanitizer and UndefinedBehaviorSanitizer, in
# build-asan/ (or FOLIO_ASAN_BUILD_DIR). Any sanitizer report fails the test that triggered it.
#
#   scripts/sanitize.sh [CTEST_ARGS...]
#
# The PyTorch tests need the safetensors package that scripts/test.sh installs into
# build/pydeps (FOLIO_BUILD_DIR); run that first, or this installs it there too. The
# transformers round trip reads build/pydeps-transformers, which only scripts/test.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${FOLIO_ASAN_BUILD_DIR:-build-asan}"
pydeps="$(realpath -m "${FOLIO_BUILD_DIR:-build}/pydeps")"
# transformers 4.38 for hf_transformers_roundtrip: scripts/test.sh installs it beside pydeps.
transformers_pydeps="$(realpath -m "${FOLIO_BUILD_DIR:-build}/pydeps-transformers")"
if ! PYTHONPATH="$pydeps" /usr/bin/python3 -c "import safetensors" 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check --target "$pydeps" safetensors
fi
data="${FOLIO_TEST_DATA:-$(./scripts/fetch_data.sh)}"
mkdir -p "$build_dir"
if ! { cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOLIO_CUDA=OFF \
         -DFOLIO_SANITIZE=address,undefined -DFOLIO_PYDEPS="$pydeps" \
         -DFOLIO_TRANSFORMERS_PYDEPS="$transformers_pydeps" \
         -DFOLIO_TEST_DATA="$(realpath "$data")" &&
       cmake --build "$build_dir" -j"$(nproc)"; } >"$build_dir/build.log" 2>&1; then
  tail -40 "$build_dir/build.log"
  echo "sanitize: the build failed (log: $build_dir/build.log)" >&2
  exit 1
fi

# halt_on_error: UBSan only prints by default, which a test that does not read stderr would miss.
# The suppressions (tests/sanitizers/) each say why they are there.
suppressions="$(realpath tests/sanitizers)"
export ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$suppressions/ubsan.supp"
export LSAN_OPTIONS="suppressions=$suppressions/lsan.supp:print_suppressions=0"
cd "$build_dir"
if [ $# -gt 0 ]; then
  exec ctest --output-on-failure -j"$(nproc)" "$@"
fi
status=0
ctest --output-on-failure -j"$(nproc)" -LE dist || status=$?
# Open MPI unloads its plugins before exit, so LeakSanitizer can neither name nor suppress what
# they keep (tests/sanitizers/lsan.supp): the ranks run without leak detection.
ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" ctest --output-on-failure -j"$(nproc)" -L dist ||
  status=$?
exit $status
