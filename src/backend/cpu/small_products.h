// Matrix products too small for a BLAS call to pay: attention's per-(sample, head) products at
// short blocks (`tiny`, `seed004`: T = 16, heads of 10, so 16 x 16 x 10 = 2,560 multiply-adds).
// dnnl_sgemm took 0.35 us for such a call on a Zen 4 core, mostly its own bookkeeping (choosing
// and looking up a kernel, packing): the 160 vector multiply-adds themselves take a few dozen
// nanoseconds. `tiny`'s attention makes 7 such products per (sample, head) and layer. Here a
// block of rows of C stays in registers (each row in at most four AVX-512 or eight AVX2 vectors)
// over the whole reduction: one load of a row of B per step for all the block's rows.
//
// The same products as sgemm_serial (row-major, C = alpha op(A) op(B) + beta C); only the order
// in which each element's K terms are added differs, as between any two BLAS kernels.
#pragma once

#include <algorithm>
#include <cstddef>

#include "backend/cpu/gemm.h"
#include "backend/cpu/vectors.h"

namespace folio::cpu {
inline namespace FOLIO_CPU_VARIANT {

namespace small_products {

constexpr int kMaxN = 64;  // columns of C: four AVX-512 registers (eight AVX2 ones) per row
constexpr int kMaxK = 64;  // the depth of a transposed B kept on the stack
// Up to here the call's overhead outweighs what a BLAS kernel gains; beyond, sgemm_serial. On a
// Zen 4 core, one product after another (oneDNN held to AVX2 for the AVX2 kernel): 16 x 16 x 10
// in 0.11-0.12 us against dnnl_sgemm's 0.35 (AVX2: 0.12-0.15 against 0.24-0.33), 32 x 32 x 8 in
// 0.26 against 0.54 (AVX2: 0.38 against 0.40); at 32 x 32 x 16 the two tie (0.79 us; AVX2 0.56),
// this kernel paying for its copy of a transposed B.
constexpr long kMaxWork = 8 * 1024;

#if defined(__AVX512F__) || defined(__AVX2__)
using namespace simd;  // whole vectors of the variant's width (vectors.h)
#endif

#if defined(__AVX512F__) || defined(__AVX2__)
// Rows i0 .. i0 + kRows - 1 of C = alpha op(A) B + beta C, B (K x N) with rows ldb apart; N <=
// kVectors * kVectorLanes, the last vector masked when kTail (N not a whole number of vectors).
// kRows rows at once: each step of k loads B's row once for all of them, and the kRows x
// kVectors sums are independent chains (one row alone waits on its multiply-adds' latency).
// The loops are unrolled on request (without, GCC 12 kept the sums on the stack), and op(A) is
// a template argument, out of the inner loop.
template <int kVectors, int kRows, bool kTransposeA, bool kTail>
inline void row_block(int i0, int N, int K, float alpha, const float* A, int lda,
                      const float* B, int ldb, float beta, float* C, int ldc) {
  const Mask tail = lanes_of(N - (kVectors - 1) * kVectorLanes);
  const auto load_vector = [&](const float* x, int v) {
    return kTail && v == kVectors - 1 ? load(x, tail) : load(x);
  };
  Vector sums[kRows][kVectors];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < kVectors; ++v) sums[r][v] = zero();
  for (int k = 0; k < K; ++k) {
    const float* b = B + size_t(k) * ldb;
    Vector b_row[kVectors];
#pragma GCC unroll 16
    for (int v = 0; v < kVectors; ++v) b_row[v] = load_vector(b + v * kVectorLanes, v);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const int i = i0 + r;
      const Vector a = broadcast(kTransposeA ? A[size_t(k) * lda + i] : A[size_t(i) * lda + k]);
#pragma GCC unroll 16
      for (int v = 0; v < kVectors; ++v) sums[r][v] = multiply_add(a, b_row[v], sums[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
    float* c = C + size_t(i0 + r) * ldc;
#pragma GCC unroll 16
    for (int v = 0; v < kVectors; ++v) {
      Vector result = multiply(broadcast(alpha), sums[r][v]);
      if (beta != 0.0f)
        result = multiply_add(broadcast(beta), load_vector(c + v * kVectorLanes, v), result);
      if (kTail && v == kVectors - 1)
        store(c + v * kVectorLanes, tail, result);
      else
        store(c + v * kVectorLanes, result);
    }
  }
}

// All M rows: blocks of as many rows as keep about eight sums in registers, then one at a time.
template <int kVectors, bool kTransposeA, bool kTail>
void rows_times_b(int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                  int ldb, float beta, float* C, int ldc) {
  constexpr int kRows = kVectors >= 8 ? 1 : 8 / kVectors;
  int i = 0;
  for (; i + kRows <= M; i += kRows)
    row_block<kVectors, kRows, kTransposeA, kTail>(i, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  for (; i < M; ++i)
    row_block<kVectors, 1, kTransposeA, kTail>(i, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <int kVectors>
void rows_times_b(bool ta, int M, int N, int K, float alpha, const float* A, int lda,
                  const float* B, int ldb, float beta, float* C, int ldc) {
  const bool tail = N % kVectorLanes != 0;
  if (ta && tail)
    return rows_times_b<kVectors, true, true>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (ta) return rows_times_b<kVectors, true, false>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (tail)
    return rows_times_b<kVectors, false, true>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  rows_times_b<kVectors, false, false>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
#endif

inline void rows_times_b_any(bool ta, int M, int N, int K, float alpha, const float* A, int lda,
                             const float* B, int ldb, float beta, float* C, int ldc) {
#if defined(__AVX512F__) || defined(__AVX2__)
  switch ((N + kVectorLanes - 1) / kVectorLanes) {
    case 1: return rows_times_b<1>(ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    case 2: return rows_times_b<2>(ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    case 3: return rows_times_b<3>(ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    case 4: return rows_times_b<4>(ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#if !defined(__AVX512F__)
    case 5: return rows_times_b<5>(ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    case 6: return rows_times_b<6>(ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    case 7: return rows_times_b<7>(ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    case 8: return rows_times_b<8>(ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
  }
#endif
  // No vector unit to speak of (the baseline variant): the plain loops, each row of C summed
  // over k before it is scaled, as above.
  float sums[kMaxN];
  for (int i = 0; i < M; ++i) {
    std::fill_n(sums, N, 0.0f);
    for (int k = 0; k < K; ++k) {
      const float a = ta ? A[size_t(k) * lda + i] : A[size_t(i) * lda + k];
      const float* b = B + size_t(k) * ldb;
      for (int j = 0; j < N; ++j) sums[j] += a * b[j];
    }
    float* c = C + size_t(i) * ldc;
    for (int j = 0; j < N; ++j) c[j] = alpha * sums[j] + (beta != 0.0f ? beta * c[j] : 0.0f);
  }
}

}  // namespace small_products

// Whether small_product takes a product of this size itself.
inline bool fits_small_product(int M, int N, int K) {
  return N <= small_products::kMaxN && K <= small_products::kMaxK &&
         long(M) * N * K <= small_products::kMaxWork;
}

// sgemm_serial's contract (single-threaded, callable inside a parallel region), for products
// that fits_small_product takes; larger ones go to sgemm_serial. A transposed B is copied to the
// stack first (K x N, at most 16 KiB), so that its rows are contiguous in j.
inline void small_product(bool ta, bool tb, int M, int N, int K, float alpha, const float* A,
                          int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) return;
  if (!fits_small_product(M, N, K))
    return sgemm_serial(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (!tb)
    return small_products::rows_times_b_any(ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  float b_rows[small_products::kMaxK * small_products::kMaxN];
  for (int j = 0; j < N; ++j)
    for (int k = 0; k < K; ++k) b_rows[size_t(k) * N + j] = B[size_t(j) * ldb + k];
  small_products::rows_times_b_any(ta, M, N, K, alpha, A, lda, b_rows, N, beta, C, ldc);
}

}  // namespace FOLIO_CPU_VARIANT
}  // namespace folio::cpu
