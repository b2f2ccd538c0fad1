// Small math kernels the compiler can vectorise inside `#pragma omp simd` loops, where the libm
// calls (expf, erff) would stay scalar. Accuracy is stated with each; the op tests check the
// results against the double-precision reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cpu/vectors.h"
#include "core/dropout_mask.h"
#include "core/philox.h"

// In the instruction set's own namespace (cpu_backend.h): an inline function compiled for AVX-512
// must never stand in for the baseline copy when the linker keeps one of each.
namespace folio::cpu {
inline namespace FOLIO_CPU_VARIANT {

// e^x to about 2 ulp (Cephes' expf polynomial after range reduction by ln 2) for x in
// [-87.3, 88.3]; outside, x is clamped, so tiny results come out near 1e-38 rather than 0 (which
// is all softmax and GELU need). Written without floor, fmin or a final select: GCC keeps those
// as library calls or branches unless -ffast-math is on, and the loop would not vectorise.
inline float vexp(float x) {
  const float clamped = std::min(std::max(x, -87.3f), 88.3f);
  // Round x / ln 2 to the nearest integer with the 1.5 * 2^23 trick: no branch, no floor call.
  const float n = (clamped * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = clamped - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t exponent_bits = (static_cast<int32_t>(n) + 127) << 23;
  float power;
  std::memcpy(&power, &exponent_bits, sizeof(power));
  return p * power;
}

// Phi(x), the standard normal distribution's CDF, to about 1e-7 absolute, and in `gaussian`
// e^(-x^2 / 2), which GELU's derivative needs too: one exp serves both. With z = |x| / sqrt(2),
// erfc(z) = t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^(-z^2), t = 1 / (1 + p z) (Abramowitz and
// Stegun 7.1.26, absolute error below 1.5e-7), and e^(-z^2) is that gaussian; then
// Phi(x) = 1 - erfc(z) / 2 for x >= 0 and erfc(z) / 2 below. It replaced Numerical Recipes' erfc
// fit, whose exp took a 10-term polynomial inside it and so could not be shared: GELU's forward
// pass 27% faster on one Zen 4 core, its backward one exp less.
inline float vnormal_cdf(float x, float& gaussian) {
  const float z = std::fabs(x) * 0.70710678118654752f;
  const float t = 1.0f / (1.0f + 0.3275911f * z);
  const float poly =
      t * (0.254829592f +
           t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  gaussian = vexp(-0.5f * x * x);
  const float half_erfc = 0.5f * poly * gaussian;
  return x >= 0.0f ? 1.0f - half_erfc : half_erfc;
}

// Phi(x) alone, for GELU's forward pass, to about 1.5e-7 absolute: 0.5 + 0.5 erf(z), z = x / sqrt(2)
// clamped to [-4, 4] (erf is +-1 in fp32 beyond), erf(z) = z P(z^2) / Q(z^2) with P of degree 6
// and Q of degree 5, fitted for folio by weighted least squares on [0, 4]
// (the errors of the fit 1.5e-9, the rest fp32 rounding). No exp: 1.4x faster than the form above
// on AVX-512 (1.3x on AVX2) in a loop over 196,608 elements (one core's half of a `baby` GELU,
// rounded to bf16 as the forward pass writes them; one Sapphire Rapids core). The backward pass
// keeps the form above, whose exp gives it the gaussian too (this form and an exp were 1.2x
// slower there).
inline float vnormal_cdf(float x) {
  const float z = std::min(std::max(x * 0.70710678118654752f, -4.0f), 4.0f);
  const float t = z * z;
  float p = -1.3664503306642928e-08f;
  p = p * t + 4.780059953191085e-06f;
  p = p * t + 3.826762258540839e-04f;
  p = p * t + 3.8395735900849104e-03f;
  p = p * t + 5.433250591158867e-02f;
  p = p * t + 1.8471276760101318e-01f;
  p = p * t + 1.128379225730896f;
  float q = 6.400471465894952e-05f;
  q = q * t + 1.3095664326101542e-03f;
  q = q * t + 1.5453550033271313e-02f;
  q = q * t + 1.138269379734993e-01f;
  q = q * t + 4.9703097343444824e-01f;
  q = q * t + 1.0f;
  return 0.5f + 0.5f * (z * p / q);
}

// x rounded to the nearest bf16 (ties to even), as PyTorch and oneDNN round: add 0x7FFF plus the
// lowest kept bit, keep the upper 16 bits. NaN stays NaN (its quiet bit is set first, so the
// rounding cannot carry it into infinity).
inline uint16_t to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  const bool nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
  bits = nan ? (bits | 0x00400000u) : bits + 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// The fp32 a bf16 stands for (exact: bf16 is fp32's upper half).
inline float from_bf16(uint16_t x) {
  const uint32_t bits = uint32_t{x} << 16;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// Reductions over a row the compiler leaves scalar when written as `m = max(m, x[j])` or
// `d += a[j] * b[j]`: a chain of dependent instructions, one element per 4 cycles (the
// compiler may not reorder float sums on its own, and GCC 12 left attention's backward
// `#pragma omp simd reduction` loop scalar too). Here kLanes (vectors.h) independent partial
// results are kept and combined in a fixed order, the same at every vector width.
#if defined(__AVX512F__) || defined(__AVX2__)
// With AVX-512 or AVX2 in whole vectors (vectors.h), the row's end masked: GCC 12 turned the
// portable loops below into 16 scalar max (or add) chains, and a row shorter than 16 (`tiny`'s)
// into the scalar remainder alone.

// the largest of x[0..n), n >= 1
inline float row_max(const float* x, int n) {
  using namespace simd;
  Vector lanes = broadcast(x[0]);
  int j = 0;
  for (; j + kVectorLanes <= n; j += kVectorLanes) lanes = maximum(lanes, load(x + j));
  if (j < n) {
    const Mask tail = lanes_of(n - j);
    lanes = maximum(lanes, select(tail, load(x + j, tail), lanes));
  }
  return reduce_max(lanes);
}

// The sums below take whole blocks of kLanes, then the last block's vectors masked (lanes past n
// read as 0; a vector wholly past n reads nothing).
constexpr int kParts = simd::LaneSums::kParts;

// the sum of x[j], j < n
inline float row_sum(const float* x, int n) {
  using namespace simd;
  LaneSums sums;
  int j = 0;
  for (; j + kLanes <= n; j += kLanes)
#pragma GCC unroll 2
    for (int q = 0; q < kParts; ++q) sums.add(q, load(x + j + q * kVectorLanes));
  if (j < n)
#pragma GCC unroll 2
    for (int q = 0; q < kParts; ++q) {
      const int k = j + q * kVectorLanes;
      sums.add(q, load(x + k, lanes_of(n - k)));
    }
  return sums.total();
}

// the sum of (x[j] - m)^2, j < n
inline float row_squared_deviations(const float* x, float m, int n) {
  using namespace simd;
  const Vector mean = broadcast(m);
  LaneSums sums;
  int j = 0;
  for (; j + kLanes <= n; j += kLanes)
#pragma GCC unroll 2
    for (int q = 0; q < kParts; ++q) {
      const Vector d = subtract(load(x + j + q * kVectorLanes), mean);
      sums.multiply_add(q, d, d);
    }
  if (j < n)
#pragma GCC unroll 2
    for (int q = 0; q < kParts; ++q) {
      const int k = j + q * kVectorLanes;
      const Mask tail = lanes_of(n - k);
      const Vector d = zero_unless(tail, subtract(load(x + k, tail), mean));
      sums.multiply_add(q, d, d);  // 0 in the lanes past n
    }
  return sums.total();
}

// the sum of a[j] * b[j], j < n
inline float row_dot(const float* a, const float* b, int n) {
  using namespace simd;
  LaneSums sums;
  int j = 0;
  for (; j + kLanes <= n; j += kLanes)
#pragma GCC unroll 2
    for (int q = 0; q < kParts; ++q) {
      const int k = j + q * kVectorLanes;
      sums.multiply_add(q, load(a + k), load(b + k));
    }
  if (j < n)
#pragma GCC unroll 2
    for (int q = 0; q < kParts; ++q) {
      const int k = j + q * kVectorLanes;
      const Mask tail = lanes_of(n - k);
      sums.multiply_add_where(q, tail, load(a + k, tail), load(b + k, tail));
    }
  return sums.total();
}
#else
// the largest of x[0..n), n >= 1
inline float row_max(const float* x, int n) {
  float lanes[kLanes];
  for (int l = 0; l < kLanes; ++l) lanes[l] = x[0];
  int j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] = lanes[l] > x[j + l] ? lanes[l] : x[j + l];
  float best = x[0];
  for (int l = 0; l < kLanes; ++l) best = best > lanes[l] ? best : lanes[l];
  for (; j < n; ++j) best = best > x[j] ? best : x[j];
  return best;
}

// the sum of x[j], j < n
inline float row_sum(const float* x, int n) {
  float lanes[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += x[j + l];
  for (int l = 0; j < n; ++j, ++l) lanes[l] += x[j];
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return lanes[0];
}

// the sum of (x[j] - m)^2, j < n
inline float row_squared_deviations(const float* x, float m, int n) {
  float lanes[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += (x[j + l] - m) * (x[j + l] - m);
  for (int l = 0; j < n; ++j, ++l) lanes[l] += (x[j] - m) * (x[j] - m);
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return lanes[0];
}

// the sum of a[j] * b[j], j < n
inline float row_dot(const float* a, const float* b, int n) {
  float lanes[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += a[j + l] * b[j + l];
  for (int l = 0; j < n; ++j, ++l) lanes[l] += a[j] * b[j];
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return lanes[0];
}
#endif

#if defined(__AVX512F__)
// The 32 x 32 -> 64-bit products m * a of 16 lanes, split into their high and low words: two
// vpmuludq (the even lanes, then the odd ones shifted down) and two blends.
inline void multiply_high_low(__m512i m, __m512i a, __m512i& high, __m512i& low) {
  const __m512i even = _mm512_mul_epu32(a, m);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  high = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  low = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
}

// Philox4x32-10 of the 16 blocks base .. base + 15 of `stream`, their 64 words written in order
// to out[0..64). The compiler's own vectorisation of the block loop below spends most of its
// time on 4-lane products and the shuffles around them; this one holds a word of 16 blocks per
// register and transposes once at the end.
inline void philox_16_blocks(const RandomStream& stream, uint32_t base, uint32_t key0,
                             uint32_t key1, uint32_t* out) {
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i c0 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(base)), lanes);
  __m512i c1 = _mm512_set1_epi32(static_cast<int>(stream.item));
  __m512i c2 = _mm512_set1_epi32(static_cast<int>(stream.step));
  __m512i c3 = _mm512_set1_epi32(static_cast<int>(stream.purpose));
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(0xCD9E8D57u));
  uint32_t k0 = key0, k1 = key1;
  for (int round = 0; round < 10; ++round) {
    __m512i high0, low0, high1, low1;
    multiply_high_low(m0, c0, high0, low0);
    multiply_high_low(m1, c2, high1, low1);
    // 0x96: a ^ b ^ c in one vpternlogd
    c0 = _mm512_ternarylogic_epi32(high1, c1, _mm512_set1_epi32(static_cast<int>(k0)), 0x96);
    c2 = _mm512_ternarylogic_epi32(high0, c3, _mm512_set1_epi32(static_cast<int>(k1)), 0x96);
    c1 = low1, c3 = low0;
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  // Transpose to block order: within each 128-bit lane j, blocks 4j .. 4j + 3 ...
  const __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
  const __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
  const __m512i b0 = _mm512_unpacklo_epi64(t0, t2), b1 = _mm512_unpackhi_epi64(t0, t2);
  const __m512i b2 = _mm512_unpacklo_epi64(t1, t3), b3 = _mm512_unpackhi_epi64(t1, t3);
  // ... then lane j of b0, b1, b2, b3 side by side: blocks 4j .. 4j + 3.
  const __m512i b01_low = _mm512_shuffle_i32x4(b0, b1, 0x44), b23_low = _mm512_shuffle_i32x4(b2, b3, 0x44);
  const __m512i b01_high = _mm512_shuffle_i32x4(b0, b1, 0xEE), b23_high = _mm512_shuffle_i32x4(b2, b3, 0xEE);
  _mm512_storeu_si512(out, _mm512_shuffle_i32x4(b01_low, b23_low, 0x88));
  _mm512_storeu_si512(out + 16, _mm512_shuffle_i32x4(b01_low, b23_low, 0xDD));
  _mm512_storeu_si512(out + 32, _mm512_shuffle_i32x4(b01_high, b23_high, 0x88));
  _mm512_storeu_si512(out + 48, _mm512_shuffle_i32x4(b01_high, b23_high, 0xDD));
}
#elif defined(__AVX2__)
// The same with AVX2: 8 lanes (see the AVX-512 version above).
inline void multiply_high_low(__m256i m, __m256i a, __m256i& high, __m256i& low) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  high = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  low = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

// Philox4x32-10 of the 8 blocks base .. base + 7, their 32 words written in order to out[0..32).
inline void philox_8_blocks(const RandomStream& stream, uint32_t base, uint32_t key0,
                            uint32_t key1, uint32_t* out) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(base)), lanes);
  __m256i c1 = _mm256_set1_epi32(static_cast<int>(stream.item));
  __m256i c2 = _mm256_set1_epi32(static_cast<int>(stream.step));
  __m256i c3 = _mm256_set1_epi32(static_cast<int>(stream.purpose));
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  uint32_t k0 = key0, k1 = key1;
  for (int round = 0; round < 10; ++round) {
    __m256i high0, low0, high1, low1;
    multiply_high_low(m0, c0, high0, low0);
    multiply_high_low(m1, c2, high1, low1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(high1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
    c2 = _mm256_xor_si256(_mm256_xor_si256(high0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
    c1 = low1, c3 = low0;
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  // Within each 128-bit lane j, blocks 4j .. 4j + 3; then the lanes side by side.
  const __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
  const __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
  const __m256i b0 = _mm256_unpacklo_epi64(t0, t2), b1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i b2 = _mm256_unpacklo_epi64(t1, t3), b3 = _mm256_unpackhi_epi64(t1, t3);
  auto* to = reinterpret_cast<__m256i*>(out);
  _mm256_storeu_si256(to, _mm256_permute2x128_si256(b0, b1, 0x20));
  _mm256_storeu_si256(to + 1, _mm256_permute2x128_si256(b2, b3, 0x20));
  _mm256_storeu_si256(to + 2, _mm256_permute2x128_si256(b0, b1, 0x31));
  _mm256_storeu_si256(to + 3, _mm256_permute2x128_si256(b2, b3, 0x31));
}
#endif

// Words first_word .. first_word + count - 1 of a random stream, as RandomStream::word() gives
// them, generated a block at a time: 16 blocks at once with AVX-512, 8 with AVX2, else in a loop
// the compiler vectorises. The vector kernels also make a chunk's last few blocks, with up to 15
// more than asked for: one kernel call costs less than the scalar loop for even 2 blocks, and
// short draws are common (a row of `tiny`'s attention weights is 16 words, 4 blocks; a
// residual row 32 words). The copy at the end takes only the words asked for.
inline void random_words(const RandomStream& stream, uint64_t first_word, size_t count,
                         uint32_t* out) {
  const uint32_t key0 = static_cast<uint32_t>(stream.seed);
  const uint32_t key1 = static_cast<uint32_t>(stream.seed >> 32);
  const uint64_t first_block = first_word >> 2;
  const size_t skip = first_word & 3;
  const size_t blocks = (skip + count + 3) / 4;
  constexpr size_t kChunk = 256;
  uint32_t words[4 * (kChunk + 16)];  // room for the blocks a last kernel call makes past n
  for (size_t done = 0; done < blocks; done += kChunk) {
    const size_t n = std::min(kChunk, blocks - done);
    const uint32_t base = static_cast<uint32_t>(first_block + done);
    size_t vectorised = 0;  // blocks made by the vector kernel (n or more)
#if defined(__AVX512F__)
    for (; vectorised < n; vectorised += 16)
      philox_16_blocks(stream, base + static_cast<uint32_t>(vectorised), key0, key1,
                       words + 4 * vectorised);
#elif defined(__AVX2__)
    for (; vectorised < n; vectorised += 8)
      philox_8_blocks(stream, base + static_cast<uint32_t>(vectorised), key0, key1,
                      words + 4 * vectorised);
#endif
#pragma omp simd
    for (size_t i = vectorised; i < n; ++i) {
      uint32_t c0 = base + static_cast<uint32_t>(i), c1 = stream.item, c2 = stream.step,
               c3 = stream.purpose, k0 = key0, k1 = key1;
      for (int round = 0; round < 10; ++round) {
        const uint64_t p0 = uint64_t{0xD2511F53u} * c0, p1 = uint64_t{0xCD9E8D57u} * c2;
        const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
        const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
        c1 = static_cast<uint32_t>(p1), c3 = static_cast<uint32_t>(p0), c0 = n0, c2 = n2;
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
      }
      words[4 * i] = c0, words[4 * i + 1] = c1, words[4 * i + 2] = c2, words[4 * i + 3] = c3;
    }
    // Copy the part of this chunk that falls inside [first_word, first_word + count).
    const size_t chunk_first = done * 4;  // word index relative to first_block * 4
    const size_t from = std::max(chunk_first, skip);
    const size_t to = std::min(chunk_first + n * 4, skip + count);
    for (size_t w = from; w < to; ++w) out[w - skip] = words[w - chunk_first];
  }
}

// out[k] = dropout.scale() if element first_element + k of `sample` is kept, else 0: the mask
// of count consecutive elements, as multipliers.
inline void dropout_multipliers(float* out, const DropoutSpec& dropout, uint32_t sample,
                                uint64_t first_element, size_t count) {
  constexpr size_t kChunk = 1024;
  uint32_t words[kChunk];
  const RandomStream stream = dropout.stream(sample);
  const uint32_t threshold = dropout.threshold();
  const float scale = dropout.scale();
  for (size_t done = 0; done < count; done += kChunk) {
    const size_t n = std::min(kChunk, count - done);
    random_words(stream, first_element + done, n, words);
#pragma omp simd
    for (size_t k = 0; k < n; ++k) out[done + k] = words[k] >= threshold ? scale : 0.0f;
  }
}

// The multipliers of `count` elements packed into bits, 1 where kept (out gets whole words, its
// bits past count zero), and back: the dropout masks a forward pass records (dropout_masks.h).
// With AVX-512 sixteen elements are one compare into a mask register, or one masked move out of
// it; a bit-at-a-time loop cost as much as the Philox draws it replaced.
inline void store_mask_bits(uint64_t* out, const float* multipliers, size_t count) {
  for (size_t word = 0; word * 64 < count; ++word) {
    const size_t first = word * 64, n = std::min<size_t>(64, count - first);
    uint64_t bits = 0;
#if defined(__AVX512F__)
    for (size_t k = 0; k < n; k += 16) {
      const __mmask16 valid = n - k >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - k)) - 1);
      const __m512 m = _mm512_maskz_loadu_ps(valid, multipliers + first + k);
      bits |= uint64_t{_mm512_mask_cmp_ps_mask(valid, m, _mm512_setzero_ps(), _CMP_NEQ_UQ)} << k;
    }
#else
    for (size_t k = 0; k < n; ++k) bits |= uint64_t{multipliers[first + k] != 0.0f} << k;
#endif
    out[word] = bits;
  }
}
inline void load_mask_bits(float* multipliers, const uint64_t* bits, size_t count, float scale) {
#if defined(__AVX512F__)
  const __m512 kept = _mm512_set1_ps(scale);
  for (size_t k = 0; k < count; k += 16) {
    const __mmask16 mask = static_cast<__mmask16>(bits[k / 64] >> (k % 64));
    const __mmask16 valid =
        count - k >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (count - k)) - 1);
    _mm512_mask_storeu_ps(multipliers + k, valid, _mm512_maskz_mov_ps(mask, kept));
  }
#elif defined(__AVX2__)
  // Eight elements a byte of bits: lane j is kept where bit j is set. GCC 12 left the portable
  // loop below scalar (0.8 ns an element on a Zen 3 core, against 0.2 for store_mask_bits, which
  // it vectorises), and every dropout site's backward pass reads its mask through it.
  // The last count % 8 go to the portable loop below.
  const __m256 kept = _mm256_set1_ps(scale);
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  size_t k = 0;
  for (; k + 8 <= count; k += 8) {
    const int byte = static_cast<int>((bits[k / 64] >> (k % 64)) & 0xFF);
    const __m256i set =
        _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(byte), lane_bit), lane_bit);
    _mm256_storeu_ps(multipliers + k, _mm256_and_ps(_mm256_castsi256_ps(set), kept));
  }
#else
  size_t k = 0;
#endif
#if !defined(__AVX512F__)
  for (; k < count; ++k) multipliers[k] = (bits[k / 64] >> (k % 64)) & 1 ? scale : 0.0f;
#endif
}

}  // namespace FOLIO_CPU_VARIANT
}  // namespace folio::cpu
