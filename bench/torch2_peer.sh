#!/usr/bin/env bash
# PyTorch 2.x from PyPI, as a new user installs it, for bench/torch_peer.py (bench/cpu_compare.sh).
# Creates its own venv outside the build (default ~/.cache/folio-bench/venv; FOLIO_BENCH_VENV
# moves it) the first time: `pip install torch` downloads gigabytes, so this is never run in CI.
# Then runs torch_peer.py in that venv with the arguments given, e.g.
#   bench/torch2_peer.sh --config baby --threads 2 --impl fused --mode bf16-compile
#   bench/torch2_peer.sh --about        # version, torch.__config__.show(), threads, CPU
set -euo pipefail
venv="${FOLIO_BENCH_VENV:-$HOME/.cache/folio-bench/venv}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  echo "torch2_peer: installing PyTorch from PyPI into $venv (gigabytes, once)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch numpy >&2
fi
exec "$venv/bin/python" "$(dirname "$0")/torch_peer.py" "$@"
