// Whole vectors of the CPU variant's width, for the kernels written with intrinsics (the row
// reductions of vector_math.h, attention's softmax rows in attention_rows.h, small_products.h):
// AVX-512's 16 lanes with mask registers, or AVX2's 8 with each mask a vector of all-ones or
// all-zeros lanes. One body of each kernel serves both widths; the baseline variant has none of
// this and keeps its portable loops. Masks are always a vector's first lanes (lanes_of).
//
// Written with intrinsics because GCC 12 left the plain loops scalar where it mattered: it split
// loops selecting on a column (j <= i ? e : 0) at i (-fsplit-loops) and vectorised neither half,
// left rows shorter than a vector to a scalar remainder, and summed reductions' lanes one after
// the other from the stack.
#pragma once

#include <algorithm>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#if !defined(FOLIO_CPU_VARIANT)
#define FOLIO_CPU_VARIANT baseline
#endif

namespace folio::cpu {
inline namespace FOLIO_CPU_VARIANT {

// Partial sums of the row reductions are kept in this many lanes at every width, and added as a
// tree at the end: the same order from AVX-512, AVX2 and the portable loops (the vector widths
// multiply-add alike, so they give the same bits; the baseline build has no fma).
constexpr int kLanes = 16;

#if defined(__AVX512F__) || defined(__AVX2__)
namespace simd {

#if defined(__AVX512F__)
constexpr int kVectorLanes = 16;
using Vector = __m512;
using Mask = __mmask16;
inline Mask lanes_of(int count) {  // the first `count` lanes (none below 0, all from 16)
  return static_cast<Mask>((1u << std::clamp(count, 0, kVectorLanes)) - 1u);
}
inline bool all_lanes(Mask m) {
  return m == Mask(0xFFFF);
}
inline Mask lanes_between(int first, int end) {  // lanes first .. end - 1
  return static_cast<Mask>(lanes_of(end) & ~lanes_of(first));
}
inline Vector load(const float* x) {
  return _mm512_loadu_ps(x);
}
inline void store(float* x, Vector v) {
  _mm512_storeu_ps(x, v);
}
inline Vector load(const float* x, Mask m) {
  return _mm512_maskz_loadu_ps(m, x);
}  // 0 elsewhere
inline void store(float* x, Mask m, Vector v) {
  _mm512_mask_storeu_ps(x, m, v);
}
inline Vector zero() {
  return _mm512_setzero_ps();
}
inline Vector broadcast(float a) {
  return _mm512_set1_ps(a);
}
inline Vector add(Vector a, Vector b) {
  return _mm512_add_ps(a, b);
}
inline Vector subtract(Vector a, Vector b) {
  return _mm512_sub_ps(a, b);
}
inline Vector multiply(Vector a, Vector b) {
  return _mm512_mul_ps(a, b);
}
inline Vector divide(Vector a, Vector b) {
  return _mm512_div_ps(a, b);
}
inline Vector multiply_add(Vector a, Vector b, Vector c) {
  return _mm512_fmadd_ps(a, b, c);
}
inline Vector multiply_subtract(Vector a, Vector b, Vector c) {
  return _mm512_fmsub_ps(a, b, c);
}
inline Vector negative_multiply_add(Vector a, Vector b, Vector c) {  // c - a b
  return _mm512_fnmadd_ps(a, b, c);
}
inline Vector minimum(Vector a, Vector b) {
  return _mm512_min_ps(a, b);
}
inline Vector maximum(Vector a, Vector b) {
  return _mm512_max_ps(a, b);
}
inline Vector zero_unless(Mask m, Vector v) {
  return _mm512_maskz_mov_ps(m, v);
}
inline Vector select(Mask m, Vector if_set, Vector otherwise) {
  return _mm512_mask_mov_ps(otherwise, m, if_set);
}
// 2^n for whole numbers n in float's exponent range, built in the exponent bits.
inline Vector power_of_two(Vector n) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23));
}
// Halves added, then their halves, down to one lane: lane l + lane l + 8, + 4, + 2, + 1.
inline float reduce_add(Vector v) {
  return _mm512_reduce_add_ps(v);
}
inline float reduce_max(Vector v) {
  return _mm512_reduce_max_ps(v);
}
#else
constexpr int kVectorLanes = 8;
using Vector = __m256;
using Mask = __m256i;
inline Mask lanes_of(int count) {  // the first `count` lanes (none below 0, all from 8)
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline bool all_lanes(Mask m) {
  return _mm256_movemask_ps(_mm256_castsi256_ps(m)) == 0xFF;
}
inline Mask lanes_between(int first, int end) {  // lanes first .. end - 1
  return _mm256_andnot_si256(lanes_of(first), lanes_of(end));
}
inline Vector load(const float* x) {
  return _mm256_loadu_ps(x);
}
inline void store(float* x, Vector v) {
  _mm256_storeu_ps(x, v);
}
inline Vector load(const float* x, Mask m) {
  return _mm256_maskload_ps(x, m);
}  // 0 elsewhere
// vmaskmovps's store is slow on AMD's cores (microcoded): the lanes go out through the stack.
inline void store(float* x, Mask m, Vector v) {
  alignas(32) float lanes[kVectorLanes];
  _mm256_store_ps(lanes, v);
  const int n = _mm_popcnt_u32(unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(m))));
  for (int l = 0; l < n; ++l) x[l] = lanes[l];
}
inline Vector zero() {
  return _mm256_setzero_ps();
}
inline Vector broadcast(float a) {
  return _mm256_set1_ps(a);
}
inline Vector add(Vector a, Vector b) {
  return _mm256_add_ps(a, b);
}
inline Vector subtract(Vector a, Vector b) {
  return _mm256_sub_ps(a, b);
}
inline Vector multiply(Vector a, Vector b) {
  return _mm256_mul_ps(a, b);
}
inline Vector divide(Vector a, Vector b) {
  return _mm256_div_ps(a, b);
}
inline Vector multiply_add(Vector a, Vector b, Vector c) {
  return _mm256_fmadd_ps(a, b, c);
}
inline Vector multiply_subtract(Vector a, Vector b, Vector c) {
  return _mm256_fmsub_ps(a, b, c);
}
inline Vector negative_multiply_add(Vector a, Vector b, Vector c) {  // c - a b
  return _mm256_fnmadd_ps(a, b, c);
}
inline Vector minimum(Vector a, Vector b) {
  return _mm256_min_ps(a, b);
}
inline Vector maximum(Vector a, Vector b) {
  return _mm256_max_ps(a, b);
}
inline Vector zero_unless(Mask m, Vector v) {
  return _mm256_and_ps(_mm256_castsi256_ps(m), v);
}
inline Vector select(Mask m, Vector if_set, Vector otherwise) {
  return _mm256_blendv_ps(otherwise, if_set, _mm256_castsi256_ps(m));
}
inline Vector power_of_two(Vector n) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23));
}
// As AVX-512's: halves added down to one lane (lane l + lane l + 4, + 2, + 1).
inline float reduce_add(Vector v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}
inline float reduce_max(Vector v) {
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
}
#endif

// A row's loads and stores masked only where the row ends inside the vector: a load of what a
// masked store wrote waits for the store to complete (no store-to-load forwarding), and each loop
// over a row reads what the loop before it wrote.
inline Vector load_lanes(const float* from, Mask lanes) {
  return all_lanes(lanes) ? load(from) : load(from, lanes);
}
inline void store_lanes(float* to, Mask lanes, Vector x) {
  if (all_lanes(lanes))
    store(to, x);
  else
    store(to, lanes, x);
}

// kLanes partial sums at either width: a row is taken in blocks of kLanes, kParts vectors each
// (one AVX-512 vector, two AVX2 ones), and vector q of every block goes to part q, so lane l of
// the sixteen sums the same elements at both widths; total() adds the parts (lane l + lane
// l + 8) and then as reduce_add: the portable loops' order. The loops over a block's parts run a
// constant number of times and are unrolled, so that `part` is a constant: a part chosen at run
// time kept the sums on the stack (LayerNorm's rows of 128 took 1.4x as long).
class LaneSums {
 public:
  static constexpr int kParts = kLanes / kVectorLanes;
  void add(int part, Vector x) { part_[part] = simd::add(part_[part], x); }
  void multiply_add(int part, Vector a, Vector b) {
    part_[part] = simd::multiply_add(a, b, part_[part]);
  }
  void multiply_add_where(int part, Mask m, Vector a, Vector b) {  // lanes outside m untouched
    part_[part] = select(m, simd::multiply_add(a, b, part_[part]), part_[part]);
  }
  float total() const {
    if constexpr (kParts == 1)
      return reduce_add(part_[0]);
    else
      return reduce_add(simd::add(part_[0], part_[1]));
  }

 private:
  Vector part_[kParts] = {};
};

// e^x of each lane: vexp's steps (vector_math.h) written out, the same polynomial.
inline Vector exp(Vector x) {
  const Vector clamped = minimum(maximum(x, broadcast(-87.3f)), broadcast(88.3f));
  const Vector shifter = broadcast(12582912.0f);
  const Vector n =
      subtract(multiply_add(clamped, broadcast(1.44269504088896341f), shifter), shifter);
  Vector r = negative_multiply_add(n, broadcast(0.693359375f), clamped);
  r = negative_multiply_add(n, broadcast(-2.12194440e-4f), r);
  Vector p = broadcast(1.9875691500e-4f);
  p = multiply_add(p, r, broadcast(1.3981999507e-3f));
  p = multiply_add(p, r, broadcast(8.3334519073e-3f));
  p = multiply_add(p, r, broadcast(4.1665795894e-2f));
  p = multiply_add(p, r, broadcast(1.6666665459e-1f));
  p = multiply_add(p, r, broadcast(5.0000001201e-1f));
  p = add(multiply_add(multiply(p, r), r, r), broadcast(1.0f));
  return multiply(p, power_of_two(n));
}

}  // namespace simd
#endif

}  // namespace FOLIO_CPU_VARIANT
}  // namespace folio::cpu
