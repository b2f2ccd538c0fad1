// Generation's few-row products on a CPU without native bf16 but with AVX2 and FMA (AMD Zen 3,
// Intel before Cooper Lake): tiles::rows_times_transposed_avx2 (bf16_tiles.h). Built with
// -march=x86-64-v3 and called only where the chosen CPU kernels are AVX2's or better. Like
// bf16_tiles.cpp it includes nothing but intrinsics, so that no inline library function compiled
// with these instructions can stand in for a baseline file's copy.
#include "backend/cpu/bf16_tiles.h"

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>

namespace folio::cpu::tiles {

namespace {

// 8 bf16 as 8 floats: bf16 is the upper half of an fp32, so widening is exact.
inline __m256 widen_8(const bf16* x) {
  const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16));
}

// The first `count` (< 8) of x, the rest zero.
inline __m256 widen_up_to_8(const bf16* x, int count) {
  alignas(16) bf16 padded[8] = {};
  for (int i = 0; i < count; ++i) padded[i] = x[i];
  return widen_8(padded);
}

inline float sum_of_lanes(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// J rows of W (n.. n + J - 1) against the M rows of A, as bf16_tiles.cpp's weight_rows: M x J
// sums of 8 lanes (at most 8 accumulators, with the M rows of A and one of W beside them in the
// 16 registers), the bf16 operands widened as loaded and multiplied-added in fp32.
template <int M, int J>
void weight_rows(int n, int K, const bf16* A, size_t lda, const bf16* W, size_t ldw, float* C,
                 size_t ldc) {
  __m256 sums[M][J];
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j) sums[m][j] = _mm256_setzero_ps();
  const auto step = [&](int k, auto widen) {
    __m256 a[M];
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m) a[m] = widen(A + m * lda + k);
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j) {
      const __m256 w = widen(W + (n + j) * ldw + k);
#pragma GCC unroll 8
      for (int m = 0; m < M; ++m) sums[m][j] = _mm256_fmadd_ps(a[m], w, sums[m][j]);
    }
  };
  int k = 0;
  for (; k + 8 <= K; k += 8) step(k, [](const bf16* x) { return widen_8(x); });
  if (k < K) step(k, [rest = K - k](const bf16* x) { return widen_up_to_8(x, rest); });
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j) C[m * ldc + n + j] = sum_of_lanes(sums[m][j]);
}

template <int M>
void rows_of_a(int n_begin, int n_end, int K, const bf16* A, size_t lda, const bf16* W, size_t ldw,
               float* C, size_t ldc) {
  constexpr int J = M == 1 ? 8 : M == 2 ? 4 : 2;  // M x J accumulators: at most 8
  int n = n_begin;
  for (; n + J <= n_end; n += J) weight_rows<M, J>(n, K, A, lda, W, ldw, C, ldc);
  for (; n < n_end; ++n) weight_rows<M, 1>(n, K, A, lda, W, ldw, C, ldc);
}

}  // namespace

void rows_times_transposed_avx2(int M, int n_begin, int n_end, int K, const bf16* A, size_t lda,
                                const bf16* W, size_t ldw, float* C, size_t ldc) {
  with_rows(M, [&](auto rows) {
    rows_of_a<decltype(rows)::count>(n_begin, n_end, K, A, lda, W, ldw, C, ldc);
  });
}

}  // namespace folio::cpu::tiles

#else  // not an x86-64 build with AVX2: never called (the caller asks for the AVX2 kernels)

#include <cstdlib>

namespace folio::cpu::tiles {
void rows_times_transposed_avx2(int, int, int, int, const bf16*, size_t, const bf16*, size_t,
                                float*, size_t) {
  std::abort();
}
}  // namespace folio::cpu::tiles

#endif
