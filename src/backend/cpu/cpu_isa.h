// Which build of the CPU backend's kernels runs: the CPU backend is compiled once per instruction
// set (CMakeLists.txt, FOLIO_CPU_VARIANTS) and the best one this CPU runs is picked at start, the
// way oneDNN picks its own kernels. FOLIO_CPU_ISA=baseline|avx2|avx512 forces one (tests run every
// variant this machine has against the reference; it also caps oneDNN at that instruction set,
// so a forced variant behaves as on a CPU that has no more).
#pragma once

#include <memory>

#include "backend/backend.h"

namespace folio::cpu {

// baseline: x86-64 (SSE2); avx2: x86-64-v3 (AVX2, FMA); avx512: x86-64-v4 (AVX-512 F/BW/DQ/VL).
enum class Variant { baseline, avx2, avx512 };

const char* variant_name(Variant variant);
bool cpu_runs(Variant variant);  // this CPU has the instructions the variant was compiled for
bool variant_built(Variant variant);  // this binary has it (a FOLIO_NATIVE build has baseline only)

// FOLIO_CPU_ISA when set (an Error if this CPU or binary lacks it), else the best this CPU runs.
Variant chosen_variant();

// One definition per variant, in that variant's cpu_backend.cpp.
template <Variant V>
std::unique_ptr<Backend> make_cpu_backend(int threads, bool bf16);

// The chosen variant's backend; the first call caps oneDNN's instruction set to match it.
std::unique_ptr<Backend> make_dispatched_cpu_backend(int threads, bool bf16);

}  // namespace folio::cpu
