// Causal multi-head attention on the CPU (reference: backend/reference/attention.h), a strip of
// query rows at a time, as flash attention does: the (T, T) probabilities are never stored.
//
// Threads take (sample, head) pairs, a sample's heads together: heads of one sample share the
// cache lines of q, k, v and out (`tiny`'s heads are 10 floats), and two threads writing one line
// pass it back and forth (one pair at a time, `tiny`'s attention took 1.2x as long on a 2-core Zen
// 3 in its quiet minutes, 2x in its busy ones; by whole samples the threads still balance, taking
// the next sample as each finishes). With fewer samples than two a thread (B = 1) they take a
// pair at a time, or one thread would have them all. For each strip of kRowBlock queries the scores
// against the keys the strip can see (its last row + 1 columns: the masked upper triangle costs
// little beyond the diagonal block) go to a kRowBlock x T scratch of the thread, become
// probabilities and multiply v. A strip holds whole rows, so the softmax is the exact two-pass one
// (no running rescaling as on a GPU, whose tiles hold only part of a row). The pass keeps each
// row's log-sum-exp, B * H * T floats; the backward pass recomputes a strip's probabilities from
// it, p = exp(score - lse), and draws the dropout masks again from the same counters. A thread's
// scratch is three strips: 1.5 MiB at T = 2048, where storing the probabilities took 768 MiB per
// layer of the shakespeare_char model at 16,384 tokens per step.
//
// With --dtype bf16 on a CPU with AMX or AVX512-BF16, the same strips run with bf16 products
// instead (attention_tiles.cpp), for heads whose size is a multiple of 32. Blocks and heads of at
// most 16 (`tiny`, `seed004`) take a pair whole, its scores transposed, in vectors
// (attention_short_blocks.h).
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/attention_rows.h"
#include "backend/cpu/attention_short_blocks.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/small_products.h"

namespace folio {

namespace {

using attention_rows::attention_backward_row;
using attention_rows::causal_softmax_row;
using attention_rows::draw_row_multipliers;
using attention_rows::draw_strip_multipliers;
using attention_rows::HeadSlices;
using attention_rows::kRowBlock;
using attention_rows::recall_row_multipliers;
using attention_rows::round_rows;

// Scratch floats per thread: three strips of kRowBlock x T and one row of dropout multipliers.
size_t scratch_floats(int T) {
  return (size_t(3) * kRowBlock + 1) * static_cast<size_t>(T);
}

// How many (sample, head) pairs a thread takes at a time: a sample's heads together where there
// are samples enough to go round (two a thread), else one pair (B = 1: GPT-2's step of one
// window, and generation), so that every thread has heads to work on.
int pairs_per_take(int B, int H, int threads) {
  return B >= 2 * threads ? H : 1;
}

}  // namespace

void CpuBackend::attention_forward(float* out, float* lse, const float* qkv, int B, int T, int H,
                                   int hs, int q_start, const DropoutSpec& dropout) {
  // A training forward pass (every row) records its masks for the backward pass.
  const cpu::MaskBits masks = dropout.active() && q_start == 0
                                  ? dropout_masks_.record(dropout, B, H * T, T)
                                  : cpu::MaskBits{};
  if (tiles_fit(hs))
    return attention_forward_tiles(out, lse, qkv, B, T, H, hs, q_start, dropout, masks);
  if (kept_in_bf16(qkv, 1) || kept_in_bf16(out, 1))
    throw Error("internal: attention on fp32 products reads and writes fp32 tensors only");
  const int A = H * hs, ld_qkv = 3 * A;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int pairs_at_a_time = pairs_per_take(B, H, threads_);
  // The projection after attention reads all of out: a copy only when all of it is written.
  cpu::bf16* out16 = q_start == 0 ? bf16_output(kOperandA, out, size_t(B) * T * A) : nullptr;

#if defined(FOLIO_ATTENTION_SHORT_BLOCKS)
  if (q_start == 0 && attention_short_blocks::fits(T, hs)) {
#pragma omp parallel for schedule(dynamic, pairs_at_a_time)
    for (int pair = 0; pair < B * H; ++pair) {
      const HeadSlices head(pair, T, H, hs);
      const float* q = qkv + head.q;
      float multipliers[attention_short_blocks::kWidth * attention_short_blocks::kWidth];
      if (dropout.active())
        draw_strip_multipliers(multipliers, dropout, head.b, head.h, T, 0, T, masks);
      attention_short_blocks::forward_pair(out + head.out, A, lse + head.lse, q, q + A, q + 2 * A,
                                           ld_qkv, T, hs, scale,
                                           dropout.active() ? multipliers : nullptr);
      if (out16) round_rows(out16 + head.out, out + head.out, T, hs, A);
    }
    return;
  }
#endif

  for (int t = 0; t < threads_; ++t) attention_scratch(t, scratch_floats(T));
#pragma omp parallel for schedule(dynamic, pairs_at_a_time)
  for (int pair = 0; pair < B * H; ++pair) {
    const HeadSlices head(pair, T, H, hs);
    const int b = head.b, h = head.h;
    const float* q = qkv + head.q;
    const float* k = q + A;
    const float* v = q + 2 * A;
    float* o = out + head.out;
    float* row_lse = lse + head.lse;
    float* strip = attention_scratch(omp_get_thread_num(), scratch_floats(T));
    float* strip_multipliers = strip + size_t(kRowBlock) * T;  // the second strip's room
    float* multipliers = strip + size_t(3) * kRowBlock * T;

    for (int r0 = q_start; r0 < T; r0 += kRowBlock) {
      const int r1 = std::min(r0 + kRowBlock, T);  // rows r0..r1-1 see keys 0..r1-1
      cpu::small_product(false, true, r1 - r0, r1, hs, scale, q + static_cast<size_t>(r0) * ld_qkv,
                         ld_qkv, k, ld_qkv, 0.0f, strip, r1);
      // The weights that multiply v, from the dropout masks that the backward pass recalls.
      const bool one_draw = dropout.active() && T <= kRowBlock;
      if (one_draw) draw_strip_multipliers(strip_multipliers, dropout, b, h, T, r0, r1, masks);
      for (int i = r0; i < r1; ++i) {
        float* p = strip + static_cast<size_t>(i - r0) * r1;
        row_lse[i] = causal_softmax_row(p, i, r1, 1.0f);  // the product scaled them
        if (!dropout.active()) continue;
        const float* m = strip_multipliers + static_cast<size_t>(i - r0) * T;
        if (!one_draw) {
          draw_row_multipliers(multipliers, dropout, b, h, T, i, masks);
          m = multipliers;
        }
#pragma omp simd
        for (int j = 0; j <= i; ++j) p[j] *= m[j];
      }
      cpu::small_product(false, false, r1 - r0, hs, r1, 1.0f, strip, r1, v, ld_qkv, 0.0f,
                        o + static_cast<size_t>(r0) * A, A);
      if (out16)
        round_rows(out16 + (o - out) + static_cast<size_t>(r0) * A, o + static_cast<size_t>(r0) * A,
                   r1 - r0, hs, A);
    }
  }
}

void CpuBackend::attention_backward(float* dqkv, const float* dout, const float* qkv,
                                    const float* lse, int B, int T, int H, int hs,
                                    const DropoutSpec& dropout, ReadBy dqkv_read_by) {
  const cpu::MaskBits masks =
      dropout.active() ? dropout_masks_.find(dropout, B, H * T, T) : cpu::MaskBits{};
  if (tiles_fit(hs))
    return attention_backward_tiles(dqkv, dout, qkv, lse, B, T, H, hs, dropout, masks,
                                    dqkv_read_by);
  if (kept_in_bf16(qkv, 1))
    throw Error("internal: attention on fp32 products reads and writes fp32 tensors only");
  const int A = H * hs, ld_qkv = 3 * A;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int pairs_at_a_time = pairs_per_take(B, H, threads_);
  // dk and dv are summed in place over the strips: the fp32 dqkv is written whoever reads it.
  cpu::bf16* dqkv16 = bf16_output(kGradient, dqkv, size_t(B) * T * ld_qkv);

#if defined(FOLIO_ATTENTION_SHORT_BLOCKS)
  if (attention_short_blocks::fits(T, hs)) {
#pragma omp parallel for schedule(dynamic, pairs_at_a_time)
    for (int pair = 0; pair < B * H; ++pair) {
      const HeadSlices head(pair, T, H, hs);
      const float* q = qkv + head.q;
      float* dq = dqkv + head.q;
      float multipliers[attention_short_blocks::kWidth * attention_short_blocks::kWidth];
      if (dropout.active())
        for (int i = 0; i < T; ++i)
          recall_row_multipliers(multipliers + i * T, dropout, head.b, head.h, T, i, masks);
      attention_short_blocks::backward_pair(dq, dq + A, dq + 2 * A, dout + head.out, A, q, q + A,
                                            q + 2 * A, ld_qkv, lse + head.lse, T, hs, scale,
                                            dropout.active() ? multipliers : nullptr);
      if (dqkv16)
        for (const float* part : {dq, dq + A, dq + 2 * A})
          round_rows(dqkv16 + (part - dqkv), part, T, hs, ld_qkv);
    }
    return;
  }
#endif

  for (int t = 0; t < threads_; ++t) attention_scratch(t, scratch_floats(T));
#pragma omp parallel for schedule(dynamic, pairs_at_a_time)
  for (int pair = 0; pair < B * H; ++pair) {
    const HeadSlices head(pair, T, H, hs);
    const int b = head.b, h = head.h;
    const float* q = qkv + head.q;
    const float* k = q + A;
    const float* v = q + 2 * A;
    float* dq = dqkv + head.q;
    float* dk = dq + A;
    float* dv = dq + 2 * A;
    const float* d_o = dout + head.out;
    const float* row_lse = lse + head.lse;

    float* probs = attention_scratch(omp_get_thread_num(), scratch_floats(T));  // p, recomputed
    float* grad = probs + size_t(kRowBlock) * T;           // d(weights), then d(scores)
    float* dropped = grad + size_t(kRowBlock) * T;         // the weights that multiplied v
    float* multipliers = dropped + size_t(kRowBlock) * T;  // one row's mask * 1/(1-p)

    // dk and dv gather contributions from every strip below them.
    for (int j = 0; j < T; ++j) {
      std::fill_n(dk + static_cast<size_t>(j) * ld_qkv, hs, 0.0f);
      std::fill_n(dv + static_cast<size_t>(j) * ld_qkv, hs, 0.0f);
    }
    for (int r0 = 0; r0 < T; r0 += kRowBlock) {
      const int r1 = std::min(r0 + kRowBlock, T), rows = r1 - r0;
      const float* q_rows = q + static_cast<size_t>(r0) * ld_qkv;
      const float* d_o_rows = d_o + static_cast<size_t>(r0) * A;
      // The strip's probabilities again, from its scores and each row's log-sum-exp.
      cpu::small_product(false, true, rows, r1, hs, scale, q_rows, ld_qkv, k, ld_qkv, 0.0f, probs,
                        r1);
      // out = weights @ v:  d(weights) = d_out @ v^T.
      cpu::small_product(false, true, rows, r1, hs, 1.0f, d_o_rows, A, v, ld_qkv, 0.0f, grad, r1);
      for (int i = r0; i < r1; ++i) {
        const size_t offset = static_cast<size_t>(i - r0) * r1;
        attention_backward_row({probs + offset, grad + offset, dropped + offset, i, row_lse[i]},
                               r1, 1.0f, scale, multipliers, dropout, masks, b, h, T);
      }
      // dv += weights^T @ d_out, over the keys the strip saw.
      cpu::small_product(true, false, r1, hs, rows, 1.0f, dropout.active() ? dropped : probs, r1,
                        d_o_rows, A, 1.0f, dv, ld_qkv);
      // scores = q @ k^T * scale:  dq = ds @ k (the strip's rows), dk += ds^T @ q.
      cpu::small_product(false, false, rows, hs, r1, 1.0f, grad, r1, k, ld_qkv, 0.0f,
                        dq + static_cast<size_t>(r0) * ld_qkv, ld_qkv);
      cpu::small_product(true, false, r1, hs, rows, 1.0f, grad, r1, q_rows, ld_qkv, 1.0f, dk,
                        ld_qkv);
    }
    if (dqkv16)  // the head's dq, dk and dv are final: round them for the qkv layer's products
      for (const float* part : {dq, dk, dv})
        round_rows(dqkv16 + (part - dqkv), part, T, hs, ld_qkv);
  }
}

}  // namespace folio
