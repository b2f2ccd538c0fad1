// What attention's two CPU paths share (attention.cpp: fp32 products by sgemm; attention_tiles.cpp:
// bf16 products on AMX tiles or with AVX512-BF16): the strip height, one query row's causal
// softmax, the row's dropout multipliers, and the bf16 copy of a head's slice for the product that
// reads it next.
#pragma once

#include <algorithm>
#include <cmath>

#include "backend/backend.h"
#include "backend/cpu/dropout_masks.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/vector_math.h"

namespace folio {
inline namespace FOLIO_CPU_VARIANT {
namespace attention_rows {

// Query rows per strip: a strip holds whole rows of scores, so the softmax is the exact two-pass
// one. 64 rows x T columns of fp32 scores stay in the core's L2 cache up to T = 2048.
constexpr int kRowBlock = 64;

// Where one (sample, head) pair's slices start: q in qkv (and dq in dqkv) with k A and v 2A
// columns after it, rows 3A apart; the head's columns of out (and d_out), rows A apart; its
// rows' log-sum-exps.
struct HeadSlices {
  int b, h;
  size_t q, out, lse;
  HeadSlices(int pair, int T, int H, int hs)
      : b(pair / H),
        h(pair % H),
        q(static_cast<size_t>(b) * T * 3 * H * hs + static_cast<size_t>(h) * hs),
        out(static_cast<size_t>(b) * T * H * hs + static_cast<size_t>(h) * hs),
        lse(static_cast<size_t>(pair) * T) {}
};

#if defined(__AVX512F__)
// The AVX-512 rows say the selects with masks, 16 columns at a time: column j of vector j0 is in
// the row when j < width and seen when j <= i. Written with intrinsics because GCC 12 split a
// loop selecting on the column (j <= i ? e : 0) at i and left both halves scalar (-fsplit-loops),
// and summed a reduction's 16 lanes one after the other: at `baby`'s rows of 32-64 columns that
// was most of the time attention spent outside its products.
inline __mmask16 lanes_before(int end, int j0) {  // lanes j0 + l < end
  return cpu::first_lanes(std::clamp(end - j0, 0, cpu::kLanes));
}
// Loads and stores masked only where the row ends inside the vector: a load of what a masked
// store wrote waits for the store to complete (no store-to-load forwarding), and each loop over a
// row reads what the loop before it wrote.
inline __m512 load_lanes(const float* from, __mmask16 lanes) {
  return lanes == 0xFFFF ? _mm512_loadu_ps(from) : _mm512_maskz_loadu_ps(lanes, from);
}
inline void store_lanes(float* to, __mmask16 lanes, __m512 x) {
  if (lanes == 0xFFFF)
    _mm512_storeu_ps(to, x);
  else
    _mm512_mask_storeu_ps(to, lanes, x);
}
#endif

// Turns scores s[0..i] of query row i, times `scale`, into probabilities, zeroes s[i+1..width),
// and returns the row's log-sum-exp of the scaled scores, max + log(sum of exp(s - max)).
//
// With AVX-512 the loops run over the whole width in vectors of 16, masked after column i and
// past the row's end: a loop stopping after column i would leave up to 15 columns to a scalar
// remainder (GCC 12 makes no masked remainders; at T = 16 every row was all remainder).
// Elsewhere they stop after column i and zeros follow, with no select on the column.
inline float causal_softmax_row(float* row, int i, int width, float scale) {
  const float max_score = cpu::row_max(row, i + 1);  // scale > 0: the max of the scaled row too
#if defined(__AVX512F__)
  const __m512 max_v = _mm512_set1_ps(max_score), scale_v = _mm512_set1_ps(scale);
  __m512 lanes = _mm512_setzero_ps();
  for (int j0 = 0; j0 < width; j0 += cpu::kLanes) {
    const __mmask16 in_row = lanes_before(width, j0), seen = lanes_before(i + 1, j0);
    const __m512 x = _mm512_sub_ps(load_lanes(row + j0, in_row), max_v);
    const __m512 e = _mm512_maskz_mov_ps(seen, cpu::vexp(_mm512_mul_ps(x, scale_v)));
    store_lanes(row + j0, in_row, e);
    lanes = _mm512_add_ps(lanes, e);
  }
  const float total = _mm512_reduce_add_ps(lanes);
  const __m512 inverse = _mm512_set1_ps(1.0f / total);
  for (int j0 = 0; j0 <= i; j0 += cpu::kLanes) {  // the vectors after column i's hold zeros
    const __mmask16 in_row = lanes_before(width, j0);
    store_lanes(row + j0, in_row, _mm512_mul_ps(load_lanes(row + j0, in_row), inverse));
  }
#else
#pragma omp simd
  for (int j = 0; j <= i; ++j) row[j] = cpu::vexp((row[j] - max_score) * scale);
  std::fill(row + i + 1, row + width, 0.0f);
  const float total = cpu::row_sum(row, i + 1);
  const float inverse = 1.0f / total;
#pragma omp simd
  for (int j = 0; j <= i; ++j) row[j] *= inverse;
#endif
  return max_score * scale + std::log(total);
}

// multipliers[0..i] = mask * 1/(1-p) of query row i's weights: element (h * T + i) * T + j of
// sample b's stream, the counters the reference and the GPU use. The forward pass draws them and
// records them in `masks` (row h * T + i of sample b) when it records; the backward pass recalls
// them from there, or draws them again when nothing was recorded.
inline void draw_row_multipliers(float* multipliers, const DropoutSpec& dropout, int b, int h,
                                 int T, int i, const cpu::MaskBits& masks) {
  cpu::dropout_multipliers(multipliers, dropout, static_cast<uint32_t>(b),
                           (static_cast<uint64_t>(h) * T + i) * T, static_cast<size_t>(i) + 1);
  if (masks.recorded())
    cpu::store_mask_bits(masks.row(b, h * T + i), multipliers, static_cast<size_t>(i) + 1);
}
// The multipliers of a whole strip of query rows r0..r1-1 in one draw, row i's T of them at
// out + (i - r0) * T (its weights' first i + 1): the rows' counters are consecutive, so this
// draws the masked columns j > i too, up to twice the words. For blocks of one strip (T <= 64)
// that is cheaper than a draw per row: a row of `tiny` is 16 words, and one call of the vector
// Philox kernel makes 64.
inline void draw_strip_multipliers(float* out, const DropoutSpec& dropout, int b, int h, int T,
                                   int r0, int r1, const cpu::MaskBits& masks) {
  cpu::dropout_multipliers(out, dropout, static_cast<uint32_t>(b),
                           (static_cast<uint64_t>(h) * T + r0) * T,
                           static_cast<size_t>(r1 - r0) * T);
  if (masks.recorded())
    for (int i = r0; i < r1; ++i)
      cpu::store_mask_bits(masks.row(b, h * T + i), out + static_cast<size_t>(i - r0) * T,
                           static_cast<size_t>(i) + 1);
}
inline void recall_row_multipliers(float* multipliers, const DropoutSpec& dropout, int b, int h,
                                   int T, int i, const cpu::MaskBits& masks) {
  if (masks.recorded())
    cpu::load_mask_bits(multipliers, masks.row(b, h * T + i), static_cast<size_t>(i) + 1,
                        dropout.scale());
  else
    draw_row_multipliers(multipliers, dropout, b, h, T, i, masks);
}

// Query row i of a strip in the backward pass, over `width` columns (zero beyond i on return):
// p holds the row's scores, which become its probabilities exp(score * score_scale - lse); g
// holds d(weights), which becomes d(scores); w (with dropout) gets the weights that multiplied v.
// `scale` is the score scale 1/sqrt(head_size), by which d(scores) is multiplied; score_scale is
// 1 when the product already applied it to p.
struct BackwardRow {
  float* p;
  float* g;
  float* w;
  int i;
  float log_sum_exp;
};
// With AVX-512 in two passes over the row, with masks as causal_softmax_row: the probabilities,
// the dropout and the sum of p dp (in row_dot's lanes and order) in the first, d(scores) in the
// second. Elsewhere the columns up to i, then zeros after them.
inline void attention_backward_row(const BackwardRow& row, int width, float score_scale,
                                   float scale, float* multipliers, const DropoutSpec& dropout,
                                   const cpu::MaskBits& masks, int b, int h, int T) {
  float* p = row.p;
  float* g = row.g;
  const int i = row.i;
#if defined(__AVX512F__)
  if (dropout.active()) recall_row_multipliers(multipliers, dropout, b, h, T, i, masks);
  const __m512 score_scale_v = _mm512_set1_ps(score_scale), lse = _mm512_set1_ps(row.log_sum_exp);
  __m512 lanes = _mm512_setzero_ps();
  for (int j0 = 0; j0 < width; j0 += cpu::kLanes) {
    const __mmask16 in_row = lanes_before(width, j0), seen = lanes_before(i + 1, j0);
    const __m512 scores = load_lanes(p + j0, in_row);
    const __m512 probs =
        _mm512_maskz_mov_ps(seen, cpu::vexp(_mm512_fmsub_ps(scores, score_scale_v, lse)));
    store_lanes(p + j0, in_row, probs);
    __m512 dp = load_lanes(g + j0, in_row);
    if (dropout.active()) {  // the multipliers are there up to column i
      const __m512 m = _mm512_maskz_loadu_ps(seen, multipliers + j0);
      store_lanes(row.w + j0, in_row, _mm512_mul_ps(probs, m));
      dp = _mm512_mul_ps(dp, m);  // through the dropout: d(probabilities)
      store_lanes(g + j0, in_row, dp);
    }
    lanes = _mm512_mask3_fmadd_ps(probs, dp, lanes, seen);  // row_dot's sum, to column i
  }
  // Through the softmax: ds = p * (dp - sum_j p_j dp_j), times the score scale.
  const __m512 p_dot_dp = _mm512_set1_ps(_mm512_reduce_add_ps(lanes));
  const __m512 scale_v = _mm512_set1_ps(scale);
  for (int j0 = 0; j0 < width; j0 += cpu::kLanes) {
    const __mmask16 in_row = lanes_before(width, j0), seen = lanes_before(i + 1, j0);
    const __m512 dp = load_lanes(g + j0, in_row), probs = load_lanes(p + j0, in_row);
    const __m512 ds = _mm512_mul_ps(_mm512_mul_ps(probs, _mm512_sub_ps(dp, p_dot_dp)), scale_v);
    store_lanes(g + j0, in_row, _mm512_maskz_mov_ps(seen, ds));
  }
#else
  // The columns up to i, then zeros after them, as causal_softmax_row; the multipliers are there
  // up to column i.
#pragma omp simd
  for (int j = 0; j <= i; ++j) p[j] = cpu::vexp(p[j] * score_scale - row.log_sum_exp);
  std::fill(p + i + 1, p + width, 0.0f);
  if (dropout.active()) {
    recall_row_multipliers(multipliers, dropout, b, h, T, i, masks);
#pragma omp simd
    for (int j = 0; j <= i; ++j) {
      row.w[j] = p[j] * multipliers[j];
      g[j] *= multipliers[j];  // through the dropout: d(probabilities)
    }
    std::fill(row.w + i + 1, row.w + width, 0.0f);
  }
  // Through the softmax: ds = p * (dp - sum_j p_j dp_j), times the score scale.
  const float p_dot_dp = cpu::row_dot(p, g, i + 1);
#pragma omp simd
  for (int j = 0; j <= i; ++j) g[j] = p[j] * (g[j] - p_dot_dp) * scale;
  std::fill(g + i + 1, g + width, 0.0f);
#endif
}

// to[r * ld + c] = bf16 of from[r * ld + c] for rows [0, rows) and columns [0, cols): one head's
// slice of a (rows, ld) tensor, rounded for the product that reads the tensor next.
inline void round_rows(cpu::bf16* to, const float* from, int rows, int cols, int ld) {
  for (int r = 0; r < rows; ++r) {
    const float* x = from + static_cast<size_t>(r) * ld;
    cpu::bf16* y = to + static_cast<size_t>(r) * ld;
#pragma omp simd
    for (int c = 0; c < cols; ++c) y[c] = cpu::to_bf16(x[c]);
  }
}

}  // namespace attention_rows
}  // namespace FOLIO_CPU_VARIANT
}  // namespace folio
