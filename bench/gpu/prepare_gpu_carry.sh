#!/usr/bin/env bash
# Run on the build machine (Debian 12 with the -dev packages) before a GPU session. Copies into
# .carry/ (git-ignored; the GPU session carries it along) what a bare CUDA machine lacks for
# bench/gpu/gpu_check.sh to build and test folio:
#   .carry/nlohmann/        nlohmann-json's headers         (-DFOLIO_NLOHMANN_INCLUDE=.carry)
#   .carry/googletest/      GoogleTest's sources            (-DFOLIO_GOOGLETEST_SOURCE=...)
#   .carry/cairo/           cairo's headers and libraries, and cairo.cmake that stands in for
#                           pkg-config's cairo (folio plot draws with it) and for PCRE2's
#   .carry/pcre2/           PCRE2's header and library (the GPT-2 tokenizer's regex engine)
#   .carry/openssl/         OpenSSL's headers and libcrypto (SHA-256; -DOPENSSL_ROOT_DIR=...)
#   .carry/gloo/            Gloo's headers and library (CPU ranks; --nproc on the GPU machine)
#   .carry/input.txt        tiny-Shakespeare
set -euo pipefail
cd "$(dirname "$0")/../.."
carry=.carry
rm -rf "$carry"
mkdir -p "$carry/cairo/include" "$carry/cairo/lib"

cp -r /usr/include/nlohmann "$carry/nlohmann"
cp -r /usr/src/googletest "$carry/googletest"

# copy_needed LIBRARY DIR: the shared libraries LIBRARY loads, into DIR, but not the C and C++
# runtimes' own (the GPU machine has those, newer). The linker finds them there through
# LD_LIBRARY_PATH, which gpu_check.sh points at DIR.
copy_needed() {
  ldd "$1" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    case "$name" in
      libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libstdc++.so* | \
        libgcc_s.so*) continue ;;
    esac
    cp -L "$path" "$2/$name"
  done
}

# cairo and the libraries it loads.
cp /usr/include/cairo/*.h "$carry/cairo/include/"
cairo=$(readlink -f /usr/lib/x86_64-linux-gnu/libcairo.so.2)
cp "$cairo" "$carry/cairo/lib/libcairo.so.2"
ln -s libcairo.so.2 "$carry/cairo/lib/libcairo.so"
copy_needed "$cairo" "$carry/cairo/lib"
cat > "$carry/cairo/cairo.cmake" <<'CMAKE'
# Stands in for pkg-config's cairo (CMAKE_PROJECT_folio_INCLUDE, set by bench/gpu/gpu_check.sh) on a
# machine without libcairo2-dev: the headers and libraries bench/gpu/prepare_gpu_carry.sh copied.
if(NOT TARGET PkgConfig::CAIRO)
  add_library(PkgConfig::CAIRO INTERFACE IMPORTED)
  target_include_directories(PkgConfig::CAIRO INTERFACE ${CMAKE_CURRENT_LIST_DIR}/include)
  target_link_libraries(PkgConfig::CAIRO INTERFACE ${CMAKE_CURRENT_LIST_DIR}/lib/libcairo.so)
  target_link_options(PkgConfig::CAIRO INTERFACE "LINKER:-rpath-link,${CMAKE_CURRENT_LIST_DIR}/lib")
endif()
CMAKE

# PCRE2, OpenSSL's libcrypto and Gloo: headers and the shared library each (the GPU machine has
# no -dev packages); gpu_check.sh points CMake at them and LD_LIBRARY_PATH at their lib/.
lib=/usr/lib/x86_64-linux-gnu
mkdir -p "$carry/pcre2/include" "$carry/pcre2/lib" "$carry/openssl/include" "$carry/openssl/lib" \
         "$carry/gloo/include" "$carry/gloo/lib"
cp /usr/include/pcre2.h "$carry/pcre2/include/"
cp -L "$lib/libpcre2-8.so.0" "$carry/pcre2/lib/libpcre2-8.so.0"
ln -s libpcre2-8.so.0 "$carry/pcre2/lib/libpcre2-8.so"
cp -r /usr/include/openssl "$carry/openssl/include/"
cp -r /usr/include/x86_64-linux-gnu/openssl/. "$carry/openssl/include/openssl/"  # opensslconf.h
cp -L "$lib/libcrypto.so.3" "$carry/openssl/lib/libcrypto.so.3"
ln -s libcrypto.so.3 "$carry/openssl/lib/libcrypto.so"
if [ -d /usr/include/gloo ]; then
  cp -r /usr/include/gloo "$carry/gloo/include/"
  gloo=$(ls /usr/lib/libgloo.so.* 2>/dev/null | head -1)
  if [ -n "$gloo" ]; then
    cp -L "$gloo" "$carry/gloo/lib/$(basename "$gloo")"
    ln -s "$(basename "$gloo")" "$carry/gloo/lib/libgloo.so"
    copy_needed "$gloo" "$carry/gloo/lib"  # hiredis, ibverbs and netlink
  fi
fi
cat >> "$carry/cairo/cairo.cmake" <<'CMAKE'
# PCRE2 likewise.
if(NOT TARGET PkgConfig::PCRE2)
  add_library(PkgConfig::PCRE2 INTERFACE IMPORTED)
  target_include_directories(PkgConfig::PCRE2 INTERFACE ${CMAKE_CURRENT_LIST_DIR}/../pcre2/include)
  target_link_libraries(PkgConfig::PCRE2 INTERFACE
                        ${CMAKE_CURRENT_LIST_DIR}/../pcre2/lib/libpcre2-8.so)
endif()
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
