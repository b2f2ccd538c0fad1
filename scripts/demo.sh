#!/usr/bin/env bash
# The demo: set up, fetch tiny-Shakespeare, train the `baby` preset (nanoGPT's CPU run: about a
# minute on 2 cores) and sample from it. Pass another preset as $1, e.g. shakespeare_char (hours
# on a CPU), and extra folio options after it.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
data=$(./scripts/fetch_data.sh)
preset="${1:-baby}"
shift || true
./build/folio train --config "$preset" --data "$data" --out_dir "out/$preset" --overwrite "$@"
echo
echo "=== a fresh sample from out/$preset/ckpt.safetensors ==="
./build/folio sample --ckpt "out/$preset/ckpt.safetensors" --max_new_tokens 500
