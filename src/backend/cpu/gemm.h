// Row-major single-precision matrix products, C = alpha * op(A) op(B) + beta * C, through the
// BLAS chosen at build time (FOLIO_BLAS): oneDNN's dnnl_sgemm, OpenBLAS's cblas_sgemm, or a
// portable blocked loop when neither is installed.
//
// On this project's 2-core AVX-512 machine oneDNN and OpenBLAS (with its SkylakeX kernels) both
// reach about 420-470 GFLOP/s on the model's shapes, but OpenBLAS 0.3.21 picks slower AVX2
// kernels unless OPENBLAS_CORETYPE is set, and cannot be told to run single-threaded inside our
// own OpenMP regions; oneDNN shares our OpenMP runtime and runs serially when nested. The
// measurements: docs/performance_cpu.md, "Choosing the BLAS".
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/cpu_isa.h"

namespace folio::cpu {

// May use every thread; call from serial code.
void sgemm(bool transpose_a, bool transpose_b, int M, int N, int K, float alpha, const float* A,
           int lda, const float* B, int ldb, float beta, float* C, int ldc);

// Single-threaded; safe to call from inside an OpenMP parallel region.
void sgemm_serial(bool transpose_a, bool transpose_b, int M, int N, int K, float alpha,
                  const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc);

// ---- bf16 products (--dtype bf16) ---------------------------------------------------------
// A bf16 number is the upper half of an fp32 one: 8 exponent bits, 7 mantissa bits.
using bf16 = uint16_t;

// C = op(A) op(B) (+ C when `accumulate`; + bias in every row when `bias`, an N-vector, which
// cannot be combined with accumulate; then max(0, .) of every element when `relu`): bf16
// operands, products summed in fp32, fp32 C and bias.
// Through oneDNN's matmul primitive, which picks AMX or AVX512-BF16 kernels where the CPU has
// them; elsewhere (no oneDNN, or a CPU it has no bf16 kernel for) the operands are widened back
// to fp32 and multiplied by sgemm: the same rounding, so the same numbers to fp32 accuracy, but
// slower than plain fp32. May use every thread; call from serial code.
void gemm_bf16(bool transpose_a, bool transpose_b, int M, int N, int K, const bf16* A, int lda,
               const bf16* B, int ldb, bool accumulate, float* C, int ldc,
               const float* bias = nullptr, bool relu = false);

// gemm_bf16 with C written as bf16: each element's fp32 sum (bias added, ReLU applied) rounded to
// nearest even, as to_bf16 rounds, for outputs kept as bf16 alone (ProductOperand). oneDNN
// writes the rows so; elsewhere, and for reductions gemm_bf16 splits, the fp32 sums are rounded
// in a pass after. Never accumulates.
void gemm_bf16_rounded(bool transpose_a, bool transpose_b, int M, int N, int K, const bf16* A,
                       int lda, const bf16* B, int ldb, bf16* C, int ldc,
                       const float* bias = nullptr, bool relu = false);

// Whether gemm_bf16 runs on native bf16 instructions (AVX512-BF16 or AMX) on this CPU.
bool bf16_is_native();
// "AMX", "AVX512-BF16", "emulated by oneDNN on AVX-512" or "widened to fp32": what gemm_bf16 uses.
const char* bf16_kernels();

const char* gemm_library();
// Caps oneDNN at the instruction set of a forced kernel variant (FOLIO_CPU_ISA), so that the
// whole backend behaves as on a CPU with no more; the best variant leaves oneDNN uncapped. Takes
// effect only before oneDNN's first product in the process.
void limit_blas_instructions(Variant variant);  // "oneDNN", "OpenBLAS" or "builtin"
void set_gemm_threads(int threads);

}  // namespace folio::cpu
