// Attention for blocks and heads of at most 16 (`tiny` and `seed004`: T = 16 and heads of 10;
// one AVX-512 vector, two AVX2 ones): one (sample, head) pair at a time, its whole score matrix
// held transposed, column j (a Wide) holding key j's scores against every query row, element i
// for row i. A row's softmax is then a max and a sum across T vectors, lane by lane, where
// the strips of attention.cpp reduce each row across its own lanes (two horizontal reductions
// per row of 16 floats), and each product is multiply-adds of whole rows with one operand
// broadcast, four rows at a time, never a transposed copy of an operand on the stack. On one
// core of the Sapphire Rapids (`folio bench --config tiny --threads 1 --batch_size 8
// --profile`, a share of the batch split): attention forward 54 -> 36 us a step, backward 59 ->
// 37 us; without dropout 36 -> 22 and 44 -> 31 (the rest is Philox's draws, unchanged).
//
// The same arithmetic as the strips: every score, product and gradient is summed over the same
// terms in the same order (small_products.h; a block of rows adds its other rows' zeros too),
// and only a row's softmax sum and its p . dp sum add their terms in another order (key by key
// here, in LaneSums' tree there).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "backend/cpu/vectors.h"

namespace folio {
inline namespace FOLIO_CPU_VARIANT {
namespace attention_short_blocks {

// Only for the vector variants: the baseline variant keeps the strips.
#if defined(__AVX512F__) || defined(__AVX2__)
#define FOLIO_ATTENTION_SHORT_BLOCKS 1
using namespace cpu::simd;
namespace simd = cpu::simd;  // the vectors' own operations, where Wide's share their names
constexpr int kWidth = 16;  // a block's rows, and a head's channels, at most
constexpr int kParts = kWidth / kVectorLanes;  // one AVX-512 vector, two AVX2 ones

inline bool fits(int T, int head_size) { return T <= kWidth && head_size <= kWidth; }

// kWidth floats (a column of scores over the query rows, or a row of a head's channels) as
// kParts vectors: element p * kVectorLanes + l is lane l of part p. The arithmetic below is
// written once on these, for both widths.
struct Wide {
  Vector part[kParts];
};
struct WideMask {
  Mask part[kParts];
};
template <typename PartOp>
inline Wide each_part(PartOp op) {
  Wide result;
#pragma GCC unroll 2
  for (int p = 0; p < kParts; ++p) result.part[p] = op(p);
  return result;
}
inline Wide wide_zero() { return each_part([](int) { return simd::zero(); }); }
inline Wide wide_broadcast(float x) {
  return each_part([&](int) { return simd::broadcast(x); });
}
inline Wide operator+(const Wide& a, const Wide& b) {
  return each_part([&](int p) { return simd::add(a.part[p], b.part[p]); });
}
inline Wide operator-(const Wide& a, const Wide& b) {
  return each_part([&](int p) { return simd::subtract(a.part[p], b.part[p]); });
}
inline Wide operator*(const Wide& a, const Wide& b) {
  return each_part([&](int p) { return simd::multiply(a.part[p], b.part[p]); });
}
inline Wide operator/(const Wide& a, const Wide& b) {
  return each_part([&](int p) { return simd::divide(a.part[p], b.part[p]); });
}
inline Wide multiply_add(float a, const Wide& b, const Wide& c) {  // a b + c
  const Vector scalar = simd::broadcast(a);
  return each_part([&](int p) { return simd::multiply_add(scalar, b.part[p], c.part[p]); });
}
inline Wide multiply_add(const Wide& a, const Wide& b, const Wide& c) {
  return each_part([&](int p) { return simd::multiply_add(a.part[p], b.part[p], c.part[p]); });
}
inline Wide maximum(const Wide& a, const Wide& b) {
  return each_part([&](int p) { return simd::maximum(a.part[p], b.part[p]); });
}
inline Wide exp(const Wide& x) {
  return each_part([&](int p) { return simd::exp(x.part[p]); });
}
// Elements first .. end - 1.
inline WideMask elements_between(int first, int end) {
  WideMask mask;
#pragma GCC unroll 2
  for (int p = 0; p < kParts; ++p)
    mask.part[p] = simd::lanes_between(first - p * kVectorLanes, end - p * kVectorLanes);
  return mask;
}
inline Wide zero_unless(const WideMask& m, const Wide& x) {
  return each_part([&](int p) { return simd::zero_unless(m.part[p], x.part[p]); });
}
inline Wide select(const WideMask& m, const Wide& if_set, const Wide& otherwise) {
  return each_part(
      [&](int p) { return simd::select(m.part[p], if_set.part[p], otherwise.part[p]); });
}
inline Wide load_wide(const float* x) {
  return each_part([&](int p) { return simd::load(x + p * kVectorLanes); });
}
inline void store_wide(float* x, const Wide& w) {
#pragma GCC unroll 2
  for (int p = 0; p < kParts; ++p) simd::store(x + p * kVectorLanes, w.part[p]);
}
// The first n elements (n <= kWidth), zeros after; and stores of the first n alone. A part with
// no element to load or store is not touched.
inline Wide load_first(const float* x, int n) {
  return each_part([&](int p) {
    const int in_part = n - p * kVectorLanes;
    if (in_part <= 0) return simd::zero();
    return in_part >= kVectorLanes ? simd::load(x + p * kVectorLanes)
                                   : simd::load(x + p * kVectorLanes, lanes_of(in_part));
  });
}
inline void store_first(float* x, int n, const Wide& w) {
#pragma GCC unroll 2
  for (int p = 0; p < kParts; ++p) {
    const int in_part = n - p * kVectorLanes;
    if (in_part <= 0) break;
    if (in_part >= kVectorLanes)
      simd::store(x + p * kVectorLanes, w.part[p]);
    else
      simd::store(x + p * kVectorLanes, lanes_of(in_part), w.part[p]);
  }
}

// to[c * kWidth + r] = from[r * ld + c] for rows r < rows and columns c < cols: a row-major
// slice (a head's q, or its d_out) as cols vectors over the rows. Lanes r >= rows keep what
// they held (the callers' zeros).
inline void transpose_into(float* to, const float* from, int rows, int cols, size_t ld) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) to[c * kWidth + r] = from[r * ld + c];
}

// Rows taken together in each loop below: their sums are independent chains of multiply-adds,
// where one row alone waits each time on the latency of the multiply-add before it.
constexpr int kBlock = 4;

// Row r of a block starting at `first`, clamped to the last of T rows: a block that runs past
// T computes its last row again and does not store it.
inline int clamped_row(int first, int r, int T) { return first + r < T ? first + r : T - 1; }

// dots[r][i] = x_i . y_j for rows j = j0 + r of y (rows ld apart) and every row i of x, given
// transposed (x_t, zeros past its rows), summed over the channels in order as small_product
// sums x y^T: the scores q k^T, so that the forward pass and the backward pass's recomputation
// agree to the bit, and d(weights) = d_out v^T.
inline void dots_with_rows(Wide (&dots)[kBlock], const float* x_t, const float* y, size_t ld,
                           int j0, int T, int head_size) {
  const float* rows[kBlock];
#pragma GCC unroll 4
  for (int r = 0; r < kBlock; ++r) {
    rows[r] = y + clamped_row(j0, r, T) * ld;
    dots[r] = wide_zero();
  }
  for (int c = 0; c < head_size; ++c) {
    const Wide x = load_wide(x_t + c * kWidth);
#pragma GCC unroll 4
    for (int r = 0; r < kBlock; ++r) dots[r] = multiply_add(rows[r][c], x, dots[r]);
  }
}

// Scores of keys j0 .. j0 + kBlock - 1 against every query row: scale * (q_i . k_j).
inline void key_scores(Wide (&scores)[kBlock], const float* q_t, const float* k, size_t ld_qkv,
                       int j0, int T, int head_size, float scale) {
  dots_with_rows(scores, q_t, k, ld_qkv, j0, T, head_size);
#pragma GCC unroll 4
  for (int r = 0; r < kBlock; ++r) scores[r] = wide_broadcast(scale) * scores[r];
}

// Query rows that see key j: j .. T - 1 (causal).
inline WideMask rows_seeing(int j, int T) { return elements_between(j, T); }

// Which terms row i of a product sums: terms j <= i (out, dq: the keys query i sees) or j >= i
// (dv, dk: the queries that see key i).
enum class Terms { kUpToRow, kFromRow };

// rows_out[i] = sum over j of coefficient(i, j) * rows_in[j] for rows i < T (head_size
// channels, rows ld_out and ld_in apart), the terms in j order. A block of rows sums the terms
// of all its rows, so coefficient(i, j) must be 0 for terms outside row i's own.
template <Terms kTerms, typename Coefficient>
inline void combine_rows(float* rows_out, size_t ld_out, const float* rows_in, size_t ld_in,
                         int T, int head_size, Coefficient coefficient) {
  for (int i0 = 0; i0 < T; i0 += kBlock) {
    Wide sums[kBlock];
#pragma GCC unroll 4
    for (int r = 0; r < kBlock; ++r) sums[r] = wide_zero();
    const int first = kTerms == Terms::kUpToRow ? 0 : i0;
    const int last = kTerms == Terms::kUpToRow ? std::min(i0 + kBlock, T) - 1 : T - 1;
    for (int j = first; j <= last; ++j) {
      const Wide row = load_first(rows_in + j * ld_in, head_size);
#pragma GCC unroll 4
      for (int r = 0; r < kBlock; ++r)
        sums[r] = multiply_add(coefficient(clamped_row(i0, r, T), j), row, sums[r]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < kBlock; ++r)
      if (i0 + r < T) store_first(rows_out + (i0 + r) * ld_out, head_size, sums[r]);
  }
}

// One pair's forward pass: out's T rows (head_size columns, ld_out apart), each row's
// log-sum-exp of its scaled scores, and, where `multipliers` (row i's dropout multipliers at
// i * T, all T of them drawn) is given, the weights dropped before they multiply v.
inline void forward_pair(float* out, size_t ld_out, float* row_lse, const float* q,
                         const float* k, const float* v, size_t ld_qkv, int T, int head_size,
                         float scale, const float* multipliers) {
  alignas(64) float q_t[kWidth * kWidth] = {};
  alignas(64) float weights_t[kWidth * kWidth];  // scores, then exps, then probabilities
  transpose_into(q_t, q, T, head_size, ld_qkv);
  Wide row_max = wide_broadcast(-std::numeric_limits<float>::infinity());
  for (int j0 = 0; j0 < T; j0 += kBlock) {
    Wide scores[kBlock];
    key_scores(scores, q_t, k, ld_qkv, j0, T, head_size, scale);
#pragma GCC unroll 4
    for (int r = 0; r < kBlock; ++r) {
      const int j = j0 + r;
      if (j >= T) break;
      store_wide(weights_t + j * kWidth, scores[r]);
      row_max = select(rows_seeing(j, T), maximum(row_max, scores[r]), row_max);
    }
  }
  Wide total = wide_zero();
  for (int j = 0; j < T; ++j) {
    float* w = weights_t + j * kWidth;
    const Wide e = zero_unless(rows_seeing(j, T), exp(load_wide(w) - row_max));
    store_wide(w, e);
    total = total + e;
  }
  alignas(64) float max_lanes[kWidth], total_lanes[kWidth];
  store_wide(max_lanes, row_max);
  store_wide(total_lanes, total);
  for (int i = 0; i < T; ++i) row_lse[i] = max_lanes[i] + std::log(total_lanes[i]);
  // Lanes past the block divide by 1, not by their zero total.
  const Wide inverse =
      wide_broadcast(1.0f) / select(elements_between(0, T), total, wide_broadcast(1.0f));
  for (int j = 0; j < T; ++j)
    store_wide(weights_t + j * kWidth, load_wide(weights_t + j * kWidth) * inverse);
  // out_i = sum over j <= i of w_ij v_j (w_ij is 0 for j > i, and so with its multiplier).
  if (multipliers)
    combine_rows<Terms::kUpToRow>(out, ld_out, v, ld_qkv, T, head_size, [&](int i, int j) {
      return weights_t[j * kWidth + i] * multipliers[i * T + j];
    });
  else
    combine_rows<Terms::kUpToRow>(out, ld_out, v, ld_qkv, T, head_size,
                                  [&](int i, int j) { return weights_t[j * kWidth + i]; });
}

// One pair's backward pass: its rows of dq, dk and dv (ld_qkv apart) from d_out's, the
// probabilities recomputed from the scores and the forward pass's log-sum-exps, and the dropout
// `multipliers` as forward_pair took them (row i's first i + 1 at i * T), or none.
inline void backward_pair(float* dq, float* dk, float* dv, const float* d_out, size_t ld_out,
                          const float* q, const float* k, const float* v, size_t ld_qkv,
                          const float* row_lse, int T, int head_size, float scale,
                          const float* multipliers) {
  alignas(64) float q_t[kWidth * kWidth] = {}, d_out_t[kWidth * kWidth] = {};
  alignas(64) float multipliers_t[kWidth * kWidth] = {};
  alignas(64) float probs_t[kWidth * kWidth], dropped_t[kWidth * kWidth];
  alignas(64) float d_scores_t[kWidth * kWidth];  // d(probabilities), then d(scores)
  transpose_into(q_t, q, T, head_size, ld_qkv);
  transpose_into(d_out_t, d_out, T, head_size, ld_out);
  if (multipliers)  // the causal part only: the rest of each row was never drawn
    for (int i = 0; i < T; ++i)
      for (int j = 0; j <= i; ++j) multipliers_t[j * kWidth + i] = multipliers[i * T + j];
  const Wide lse = load_first(row_lse, T);
  Wide p_dot_dp = wide_zero();
  for (int j0 = 0; j0 < T; j0 += kBlock) {
    Wide scores[kBlock], d_weights[kBlock];
    key_scores(scores, q_t, k, ld_qkv, j0, T, head_size, scale);
    // out = weights v:  d(weights)_ij = d_out_i . v_j.
    dots_with_rows(d_weights, d_out_t, v, ld_qkv, j0, T, head_size);
#pragma GCC unroll 4
    for (int r = 0; r < kBlock; ++r) {
      const int j = j0 + r;
      if (j >= T) break;
      const Wide probs = zero_unless(rows_seeing(j, T), exp(scores[r] - lse));
      Wide d_probs = d_weights[r];
      if (multipliers) {  // through the dropout
        const Wide m = load_wide(multipliers_t + j * kWidth);
        store_wide(dropped_t + j * kWidth, probs * m);
        d_probs = d_probs * m;
      }
      store_wide(probs_t + j * kWidth, probs);
      store_wide(d_scores_t + j * kWidth, d_probs);
      p_dot_dp = multiply_add(probs, d_probs, p_dot_dp);  // unseen lanes add p = 0 times dp
    }
  }
  // Through the softmax: ds = p (dp - sum_j p_j dp_j), times the score scale.
  for (int j = 0; j < T; ++j) {
    float* ds = d_scores_t + j * kWidth;
    const Wide probs = load_wide(probs_t + j * kWidth);
    const Wide d = probs * (load_wide(ds) - p_dot_dp) * wide_broadcast(scale);
    store_wide(ds, zero_unless(rows_seeing(j, T), d));
  }
  // dv_j = sum over i >= j of w_ij d_out_i; dk_j = sum of ds_ij q_i; dq_i = sum over j <= i of
  // ds_ij k_j. Every coefficient outside the causal part is 0.
  const float* weights_t = multipliers ? dropped_t : probs_t;
  combine_rows<Terms::kFromRow>(dv, ld_qkv, d_out, ld_out, T, head_size,
                                [&](int j, int i) { return weights_t[j * kWidth + i]; });
  combine_rows<Terms::kFromRow>(dk, ld_qkv, q, ld_qkv, T, head_size,
                                [&](int j, int i) { return d_scores_t[j * kWidth + i]; });
  combine_rows<Terms::kUpToRow>(dq, ld_qkv, k, ld_qkv, T, head_size,
                                [&](int i, int j) { return d_scores_t[j * kWidth + i]; });
}
#endif

}  // namespace attention_short_blocks
}  // namespace FOLIO_CPU_VARIANT
}  // namespace folio
