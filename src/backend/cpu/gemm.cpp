#include "backend/cpu/gemm.h"

#include <algorithm>
#include <cstddef>

#if defined(FOLIO_BLAS_DNNL)
#include <dnnl.h>
#elif defined(FOLIO_BLAS_OPENBLAS)
#include <cblas.h>
#endif

namespace folio::cpu {

namespace {

// The portable fallback: C = alpha op(A) op(B) + beta C with a loop order that keeps the inner
// loop contiguous in C and in B (or B^T), so the compiler vectorises it. Slow next to a real BLAS
// (a few GFLOP/s), but right; it only runs where no BLAS was found at build time.
[[maybe_unused]] void builtin_sgemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
                   const float* B, int ldb, float beta, float* C, int ldc, bool parallel) {
#pragma omp parallel for schedule(static) if (parallel)
  for (int i = 0; i < M; ++i) {
    float* c = C + static_cast<size_t>(i) * ldc;
    if (tb && !ta) {  // rows of A and of B are both contiguous in k: dot products
      const float* a = A + static_cast<size_t>(i) * lda;
      for (int j = 0; j < N; ++j) {
        const float* b = B + static_cast<size_t>(j) * ldb;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int k = 0; k < K; ++k) dot += a[k] * b[k];
        c[j] = alpha * dot + (beta == 0.0f ? 0.0f : beta * c[j]);
      }
      continue;
    }
    for (int j = 0; j < N; ++j) c[j] = beta == 0.0f ? 0.0f : c[j] * beta;
    for (int k = 0; k < K; ++k) {
      const float a = alpha * (ta ? A[static_cast<size_t>(k) * lda + i]
                                  : A[static_cast<size_t>(i) * lda + k]);
      if (tb) {
        for (int j = 0; j < N; ++j) c[j] += a * B[static_cast<size_t>(j) * ldb + k];
      } else {
        const float* b = B + static_cast<size_t>(k) * ldb;
#pragma omp simd
        for (int j = 0; j < N; ++j) c[j] += a * b[j];
      }
    }
  }
}

}  // namespace

void sgemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) return;
#if defined(FOLIO_BLAS_DNNL)
  dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#elif defined(FOLIO_BLAS_OPENBLAS)
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
              K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
  builtin_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, /*parallel=*/true);
#endif
}

void sgemm_serial(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
                  const float* B, int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) return;
#if defined(FOLIO_BLAS_DNNL)
  // Inside an OpenMP parallel region oneDNN runs on the calling thread alone.
  dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
  builtin_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, /*parallel=*/false);
#endif
}

const char* gemm_library() {
#if defined(FOLIO_BLAS_DNNL)
  return "oneDNN";
#elif defined(FOLIO_BLAS_OPENBLAS)
  return "OpenBLAS";
#else
  return "builtin";
#endif
}

void limit_blas_instructions(Variant variant) {
#if defined(FOLIO_BLAS_DNNL)
  if (variant == Variant::avx2) dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2);
  if (variant == Variant::baseline) dnnl_set_max_cpu_isa(dnnl_cpu_isa_sse41);
#else
  (void)variant;
#endif
}

void set_gemm_threads(int threads) {
#if defined(FOLIO_BLAS_OPENBLAS)
  openblas_set_num_threads(threads);
#else
  (void)threads;  // oneDNN and the builtin loop follow OpenMP's thread count
#endif
}

}  // namespace folio::cpu
