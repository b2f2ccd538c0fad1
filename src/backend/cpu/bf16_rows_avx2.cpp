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

// One row of W (n) against the M rows of A, the row read from its start to its end, as
// bf16_tiles.cpp's weight_row (one sequential stream a thread): the bf16 operands widened as
// loaded and multiplied-added in fp32, 8 numbers a vector, in M x Chains accumulators (Chains
// vectors a step, each its own chain of FMAs, so that their latencies overlap).
template <int M>
void weight_row(int n, int K, const bf16* A, size_t lda, const bf16* W, size_t ldw, float* C,
                size_t ldc) {
  constexpr int kChains = M == 1 ? 4 : M == 2 ? 2 : 1;
  const bf16* w = W + n * ldw;
  __m256 sums[M][kChains];
#pragma GCC unroll 4
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
    for (int chain = 0; chain < kChains; ++chain) sums[m][chain] = _mm256_setzero_ps();
  int k = 0;
  for (; k + 8 * kChains <= K; k += 8 * kChains) {
#pragma GCC unroll 4
    for (int chain = 0; chain < kChains; ++chain) {
      const __m256 weights = widen_8(w + k + 8 * chain);
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m)
        sums[m][chain] =
            _mm256_fmadd_ps(widen_8(A + m * lda + k + 8 * chain), weights, sums[m][chain]);
    }
  }
  for (; k + 8 <= K; k += 8) {
    const __m256 weights = widen_8(w + k);
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m)
      sums[m][0] = _mm256_fmadd_ps(widen_8(A + m * lda + k), weights, sums[m][0]);
  }
  if (k < K) {
    const __m256 weights = widen_up_to_8(w + k, K - k);
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m)
      sums[m][0] = _mm256_fmadd_ps(widen_up_to_8(A + m * lda + k, K - k), weights, sums[m][0]);
  }
#pragma GCC unroll 4
  for (int m = 0; m < M; ++m) {
    __m256 total = sums[m][0];
#pragma GCC unroll 4
    for (int chain = 1; chain < kChains; ++chain) total = _mm256_add_ps(total, sums[m][chain]);
    C[m * ldc + n] = sum_of_lanes(total);
  }
}

}  // namespace

void rows_times_transposed_avx2(int M, int n_begin, int n_end, int K, const bf16* A, size_t lda,
                                const bf16* W, size_t ldw, float* C, size_t ldc) {
  with_rows(M, [&](auto rows) {
    for (int n = n_begin; n < n_end; ++n)
      weight_row<decltype(rows)::count>(n, K, A, lda, W, ldw, C, ldc);
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
