#!/usr/bin/env bash
# Run on the build machine (Debian 12 with the -dev packages) before a GPU session. Copies into
# .carry/ (git-ignored; the GPU session carries it along) what a bare CUDA machine lacks for
# bench/gpu/gpu_check.sh to build and test folio:
#   .carry/nlohmann/        nlohmann-json's headers         (-DFOLIO_NLOHMANN_INCLUDE=.carry)
#   .carry/googletest/      GoogleTest's sources            (-DFOLIO_GOOGLETEST_SOURCE=...)
#   .carry/cairo/           cairo's headers and libraries, and cairo.cmake that stands in for
#                           pkg-config's cairo (folio plot draws with it)
#   .carry/input.txt        tiny-Shakespeare
set -euo pipefail
cd "$(dirname "$0")/../.."
carry=.carry
rm -rf "$carry"
mkdir -p "$carry/cairo/include" "$carry/cairo/lib"

cp -r /usr/include/nlohmann "$carry/nlohmann"
cp -r /usr/src/googletest "$carry/googletest"

# cairo and the libraries it loads, but not the C library's own (the GPU machine has those).
cp /usr/include/cairo/*.h "$carry/cairo/include/"
cairo=$(readlink -f /usr/lib/x86_64-linux-gnu/libcairo.so.2)
cp "$cairo" "$carry/cairo/lib/libcairo.so.2"
ln -s libcairo.so.2 "$carry/cairo/lib/libcairo.so"
ldd "$cairo" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
  case "$name" in libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux*) continue ;; esac
  cp -L "$path" "$carry/cairo/lib/$name"
done
cat > "$carry/cairo/cairo.cmake" <<'CMAKE'
# Stands in for pkg-config's cairo (CMAKE_PROJECT_folio_INCLUDE, set by bench/gpu/gpu_check.sh) on a
# machine without libcairo2-dev: the headers and libraries bench/gpu/prepare_gpu_carry.sh copied.
if(TARGET PkgConfig::CAIRO)
  return()
endif()
set(CMAKE_DISABLE_FIND_PACKAGE_PkgConfig TRUE)
set(CAIRO_FOUND TRUE)
add_library(PkgConfig::CAIRO INTERFACE IMPORTED)
target_include_directories(PkgConfig::CAIRO INTERFACE ${CMAKE_CURRENT_LIST_DIR}/include)
target_link_libraries(PkgConfig::CAIRO INTERFACE ${CMAKE_CURRENT_LIST_DIR}/lib/libcairo.so)
target_link_options(PkgConfig::CAIRO INTERFACE "LINKER:-rpath-link,${CMAKE_CURRENT_LIST_DIR}/lib")
CMAKE

for data in ../shared/data/tinyshakespeare/input.txt \
            data/tinyshakespeare/input.txt; do
  if [ -f "$data" ]; then
    cp "$data" "$carry/input.txt"
    break
  fi
done
[ -f "$carry/input.txt" ] || echo "prepare_gpu_carry: no tiny-Shakespeare found; the GPU check will need FOLIO_TEST_DATA" >&2
du -sh "$carry"
