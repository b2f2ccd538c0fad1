#!/usr/bin/env bash
# Installs what folio needs from Debian's packages (when missing) and builds it into build/.
# Safe to run again: it skips what is already there. FOLIO_BUILD_DIR overrides build/.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake git curl ca-certificates pkg-config
          libdnnl-dev nlohmann-json3-dev libpcre2-dev libssl-dev libgtest-dev libcairo2-dev
          fonts-dejavu-core libopenmpi-dev openmpi-bin iproute2 libgloo-dev
          python3 python3-torch python3-numpy)
# The SLURM test (tests/distributed/test_slurm.py) runs its own munged, slurmctld and slurmd; the
# packages' own services stay down without /etc/slurm/slurm.conf (and under policy-rc.d).
packages+=(slurm-wlm munge)
# scripts/fuzz.sh: clang with libFuzzer and its sanitizer runtimes.
packages+=(clang libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

build_dir="${FOLIO_BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release ${FOLIO_CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
echo "setup: built $build_dir/folio"
