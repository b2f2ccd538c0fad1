// Row-major single-precision matrix products, C = alpha * op(A) op(B) + beta * C, through the
// BLAS chosen at build time (FOLIO_BLAS): oneDNN's dnnl_sgemm, OpenBLAS's cblas_sgemm, or a
// portable blocked loop when neither is installed.
//
// On this project's 2-core AVX-512 machine oneDNN and OpenBLAS (with its SkylakeX kernels) both
// reach about 420-470 GFLOP/s on the model's shapes, but OpenBLAS 0.3.21 picks slower AVX2
// kernels unless OPENBLAS_CORETYPE is set, and cannot be told to run single-threaded inside our
// own OpenMP regions; oneDNN shares our OpenMP runtime and runs serially when nested. README.md
// ("Choosing the BLAS") has the measurements.
#pragma once

namespace folio::cpu {

// May use every thread; call from serial code.
void sgemm(bool transpose_a, bool transpose_b, int M, int N, int K, float alpha, const float* A,
           int lda, const float* B, int ldb, float beta, float* C, int ldc);

// Single-threaded; safe to call from inside an OpenMP parallel region.
void sgemm_serial(bool transpose_a, bool transpose_b, int M, int N, int K, float alpha,
                  const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc);

const char* gemm_library();  // "oneDNN", "OpenBLAS" or "builtin"
void set_gemm_threads(int threads);

}  // namespace folio::cpu
