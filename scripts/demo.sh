#!/usr/bin/env bash
# The demo: set up, fetch tiny-Shakespeare, train the `baby` preset (nanoGPT's CPU run: a minute
# or two on 2 cores; 92 s on a 2-core Zen 3, 2026-11-28) and sample from it. Pass another preset
# as $1, e.g. shakespeare_char (hours on a CPU), and extra folio options after it.
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
