#!/usr/bin/env bash
# The tests: set up, install the official safetensors reader for the interop tests (into
# build/pydeps, not the system), fetch tiny-Shakespeare, and run every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
build_dir="${FOLIO_BUILD_DIR:-build}"
if ! PYTHONPATH="$build_dir/pydeps" /usr/bin/python3 -c "import safetensors" 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check --target "$build_dir/pydeps" \
    safetensors
fi
data="${FOLIO_TEST_DATA:-$(./scripts/fetch_data.sh)}"
cmake -S . -B "$build_dir" -DFOLIO_TEST_DATA="$(realpath "$data")" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
cd "$build_dir"
ctest --output-on-failure -j"$(nproc)" "$@"
