// Picks the CPU backend's kernel variant at run time (cpu_isa.h).
#include "backend/cpu/cpu_isa.h"

#include <cstdlib>
#include <string>

#include "backend/cpu/bf16_tiles.h"
#include "backend/cpu/gemm.h"
#include "core/error.h"

namespace folio::cpu {

const char* variant_name(Variant variant) {
  switch (variant) {
    case Variant::avx512: return "avx512";
    case Variant::avx2: return "avx2";
    case Variant::baseline: break;
  }
  return "baseline";
}

// The variants are built for x86-64-v4 and -v3. Their level names are a newer spelling of
// __builtin_cpu_supports than clang 14 (the fuzz build) knows, so ask for the features each level
// is defined by; the ones not asked (LZCNT, MOVBE, F16C) come with these on every such CPU.
namespace {
bool cpu_runs_x86_64_v3() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
}
}  // namespace

bool cpu_runs(Variant variant) {
  __builtin_cpu_init();
  switch (variant) {
    case Variant::avx512:
      return cpu_runs_x86_64_v3() && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd");
    case Variant::avx2: return cpu_runs_x86_64_v3();
    case Variant::baseline: break;
  }
  return true;
}

bool variant_built(Variant variant) {
  switch (variant) {
#if defined(FOLIO_CPU_HAS_AVX512)
    case Variant::avx512: return true;
#endif
#if defined(FOLIO_CPU_HAS_AVX2)
    case Variant::avx2: return true;
#endif
    case Variant::baseline: return true;
    default: return false;
  }
}

Variant chosen_variant() {
  const Variant by_preference[] = {Variant::avx512, Variant::avx2, Variant::baseline};
  if (const char* forced = std::getenv("FOLIO_CPU_ISA"); forced && *forced) {
    for (Variant variant : by_preference) {
      if (std::string(forced) != variant_name(variant)) continue;
      if (!variant_built(variant))
        throw Error(std::string("FOLIO_CPU_ISA=") + forced +
                    ": this folio was built without that variant (FOLIO_NATIVE=ON builds only "
                    "one); unset FOLIO_CPU_ISA");
      if (!cpu_runs(variant))
        throw Error(std::string("FOLIO_CPU_ISA=") + forced +
                    ": this CPU lacks its instructions; use a lesser one (avx2, baseline) or "
                    "unset FOLIO_CPU_ISA");
      return variant;
    }
    throw Error(std::string("FOLIO_CPU_ISA=") + forced +
                " is not a kernel variant: use avx512, avx2 or baseline, or unset it");
  }
  for (Variant variant : by_preference)
    if (variant_built(variant) && cpu_runs(variant)) return variant;
  return Variant::baseline;
}

const char* tiles::engine_name(tiles::Engine engine) {
  switch (engine) {
    case tiles::Engine::amx: return "AMX tiles";
    case tiles::Engine::avx512_bf16: return "AVX512-BF16";
    case tiles::Engine::none: break;
  }
  return "none";
}

tiles::Engine tiles::chosen_engine() {
  struct Named {
    Engine engine;
    const char* name;
  };
  const Named by_preference[] = {
      {Engine::amx, "amx"}, {Engine::avx512_bf16, "avx512_bf16"}, {Engine::none, "none"}};
  if (const char* forced = std::getenv("FOLIO_ATTENTION_TILES"); forced && *forced) {
    for (const Named& named : by_preference) {
      if (std::string(forced) != named.name) continue;
      if (!engine_runs(named.engine))
        throw Error(std::string("FOLIO_ATTENTION_TILES=") + forced +
                    ": this CPU or build lacks it; use a lesser one (avx512_bf16, none) or "
                    "unset FOLIO_ATTENTION_TILES");
      return named.engine;
    }
    throw Error(std::string("FOLIO_ATTENTION_TILES=") + forced +
                " is not an engine of attention's bf16 products: use amx, avx512_bf16 or none, "
                "or unset it");
  }
  for (const Named& named : by_preference)
    if (engine_runs(named.engine)) return named.engine;
  return Engine::none;
}

std::unique_ptr<Backend> make_dispatched_cpu_backend(int threads, bool bf16) {
  const Variant variant = chosen_variant();
  limit_blas_instructions(variant);
  switch (variant) {
#if defined(FOLIO_CPU_HAS_AVX512)
    case Variant::avx512: return make_cpu_backend<Variant::avx512>(threads, bf16);
#endif
#if defined(FOLIO_CPU_HAS_AVX2)
    case Variant::avx2: return make_cpu_backend<Variant::avx2>(threads, bf16);
#endif
    default: return make_cpu_backend<Variant::baseline>(threads, bf16);
  }
}

}  // namespace folio::cpu
