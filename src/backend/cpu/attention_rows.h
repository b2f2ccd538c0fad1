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
#include "backend/cpu/vectors.h"

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

#if defined(__AVX512F__) || defined(__AVX2__)
// The vector rows (vectors.h) say the selects with masks: column j of vector j0 is in the row
// when j < width and seen when j <= i.
inline cpu::simd::Mask lanes_before(int end, int j0) {
  return cpu::simd::lanes_of(end - j0);
}
#endif

// Turns scores s[0..i] of query row i, times `scale`, into probabilities, zeroes s[i+1..width),
// and returns the row's log-sum-exp of the scaled scores, max + log(sum of exp(s - max)).
//
// With AVX-512 or AVX2 the loops run over the whole width in vectors, masked after column i and
// past the row's end: a loop stopping after column i would leave up to a vector's width of
// columns to a scalar remainder (GCC 12 makes no masked remainders; at T = 16 every row was all
// remainder). Elsewhere they stop after column i and zeros follow, with no select on the column.
inline float causal_softmax_row(float* row, int i, int width, float scale) {
  const float max_score = cpu::row_max(row, i + 1);  // scale > 0: the max of the scaled row too
#if defined(__AVX512F__) || defined(__AVX2__)
  using namespace cpu::simd;
  const Vector max_v = broadcast(max_score), scale_v = broadcast(scale);
  LaneSums sums;
  for (int j0 = 0; j0 < width; j0 += cpu::kLanes)
#pragma GCC unroll 2
    for (int q = 0; q < LaneSums::kParts; ++q) {  // a block's vectors (LaneSums)
      const int j = j0 + q * kVectorLanes;
      if (j >= width) break;
      const Mask in_row = lanes_before(width, j);
      if (j > i) {  // past the diagonal: zeros
        store_lanes(row + j, in_row, zero());
        continue;
      }
      const Vector x = subtract(load_lanes(row + j, in_row), max_v);
      const Vector e = zero_unless(lanes_before(i + 1, j), exp(multiply(x, scale_v)));
      store_lanes(row + j, in_row, e);
      sums.add(q, e);
    }
  const float total = sums.total();
  const Vector inverse = broadcast(1.0f / total);
  for (int j = 0; j <= i; j += kVectorLanes) {  // the vectors after column i's hold zeros
    const Mask in_row = lanes_before(width, j);
    store_lanes(row + j, in_row, multiply(load_lanes(row + j, in_row), inverse));
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
// With AVX-512 or AVX2 in two passes over the row, with masks as causal_softmax_row: the
// probabilities, the dropout and the sum of p dp (in row_dot's lanes and order) in the first,
// d(scores) in the second. Elsewhere the columns up to i, then zeros after them.
inline void attention_backward_row(const BackwardRow& row, int width, float score_scale,
                                   float scale, float* multipliers, const DropoutSpec& dropout,
                                   const cpu::MaskBits& masks, int b, int h, int T) {
  float* p = row.p;
  float* g = row.g;
  const int i = row.i;
#if defined(__AVX512F__) || defined(__AVX2__)
  using namespace cpu::simd;
  if (dropout.active()) recall_row_multipliers(multipliers, dropout, b, h, T, i, masks);
  const Vector score_scale_v = broadcast(score_scale), lse = broadcast(row.log_sum_exp);
  LaneSums p_dot_dp_sums;
  for (int j0 = 0; j0 <= i; j0 += cpu::kLanes)
#pragma GCC unroll 2
    for (int q = 0; q < LaneSums::kParts; ++q) {  // a block's vectors (LaneSums)
      const int j = j0 + q * kVectorLanes;
      if (j > i) break;
      const Mask in_row = lanes_before(width, j), seen = lanes_before(i + 1, j);
      const Vector scores = load_lanes(p + j, in_row);
      const Vector probs = zero_unless(seen, exp(multiply_subtract(scores, score_scale_v, lse)));
      store_lanes(p + j, in_row, probs);
      Vector dp = load_lanes(g + j, in_row);
      if (dropout.active()) {  // the multipliers are there up to column i
        const Vector m = load_lanes(multipliers + j, seen);
        store_lanes(row.w + j, in_row, multiply(probs, m));
        dp = multiply(dp, m);  // through the dropout: d(probabilities)
        store_lanes(g + j, in_row, dp);
      }
      p_dot_dp_sums.multiply_add_where(q, seen, probs, dp);  // row_dot's sum, to column i
    }
  // Through the softmax: ds = p * (dp - sum_j p_j dp_j), times the score scale.
  const Vector p_dot_dp = broadcast(p_dot_dp_sums.total());
  const Vector scale_v = broadcast(scale);
  for (int j0 = 0; j0 < width; j0 += kVectorLanes) {
    const Mask in_row = lanes_before(width, j0);
    if (j0 > i) {  // past the diagonal: zeros in all three rows
      store_lanes(p + j0, in_row, zero());
      store_lanes(g + j0, in_row, zero());
      if (dropout.active()) store_lanes(row.w + j0, in_row, zero());
      continue;
    }
    const Vector dp = load_lanes(g + j0, in_row), probs = load_lanes(p + j0, in_row);
    const Vector ds = multiply(multiply(probs, subtract(dp, p_dot_dp)), scale_v);
    store_lanes(g + j0, in_row, zero_unless(lanes_before(i + 1, j0), ds));
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
