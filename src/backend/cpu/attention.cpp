// Causal multi-head attention on the CPU (reference: backend/reference/attention.h), a strip of
// query rows at a time, as flash attention does: the (T, T) probabilities are never stored.
//
// Threads take (sample, head) pairs. For each strip of kRowBlock queries the scores against the
// keys the strip can see (its last row + 1 columns: the masked upper triangle costs little beyond
// the diagonal block) go to a kRowBlock x T scratch of the thread, become probabilities and
// multiply v. A strip holds whole rows, so the softmax is the exact two-pass one (no running
// rescaling as on a GPU, whose tiles hold only part of a row). The pass keeps each row's
// log-sum-exp, B * H * T floats; the backward pass recomputes a strip's probabilities from it,
// p = exp(score - lse), and draws the dropout masks again from the same counters. A thread's
// scratch is three strips: 1.5 MiB at T = 2048, where storing the probabilities took 768 MiB per
// layer of the shakespeare_char model at 16,384 tokens per step.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/vector_math.h"

namespace folio {

namespace {

constexpr int kRowBlock = 64;

// Scratch floats per thread: three strips of kRowBlock x T and one row of dropout multipliers.
size_t scratch_floats(int T) {
  return (size_t(3) * kRowBlock + 1) * static_cast<size_t>(T);
}

// Turns scores s[0..i] of query row i into probabilities, zeroes s[i+1..width), and returns
// the row's log-sum-exp, max + log(sum of exp(s - max)).
float causal_softmax_row(float* row, int i, int width) {
  const float max_score = cpu::row_max(row, i + 1);
  float total = 0.0f;
#pragma omp simd reduction(+ : total)
  for (int j = 0; j <= i; ++j) {
    row[j] = cpu::vexp(row[j] - max_score);
    total += row[j];
  }
  const float inverse = 1.0f / total;
#pragma omp simd
  for (int j = 0; j <= i; ++j) row[j] *= inverse;
  std::fill(row + i + 1, row + width, 0.0f);
  return max_score + std::log(total);
}

// multipliers[0..i] = mask * 1/(1-p) of query row i's weights: element (h * T + i) * T + j of
// sample b's stream, the counters the reference and the GPU use.
void draw_row_multipliers(float* multipliers, const DropoutSpec& dropout, int b, int h, int T,
                          int i) {
  cpu::dropout_multipliers(multipliers, dropout, static_cast<uint32_t>(b),
                           (static_cast<uint64_t>(h) * T + i) * T, static_cast<size_t>(i) + 1);
}

// to[r * ld + c] = bf16 of from[r * ld + c] for rows [0, rows) and columns [0, cols): one head's
// slice of a (rows, ld) tensor, rounded for the product that reads the tensor next.
void round_rows(cpu::bf16* to, const float* from, int rows, int cols, int ld) {
  for (int r = 0; r < rows; ++r) {
    const float* x = from + static_cast<size_t>(r) * ld;
    cpu::bf16* y = to + static_cast<size_t>(r) * ld;
#pragma omp simd
    for (int c = 0; c < cols; ++c) y[c] = cpu::to_bf16(x[c]);
  }
}

}  // namespace

void CpuBackend::attention_forward(float* out, float* lse, const float* qkv, int B, int T, int H,
                                   int hs, int q_start, const DropoutSpec& dropout) {
  const int A = H * hs, ld_qkv = 3 * A;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int t = 0; t < threads_; ++t) attention_scratch(t, scratch_floats(T));
  // The projection after attention reads all of out: a copy only when all of it is written.
  cpu::bf16* out16 = q_start == 0 ? bf16_output(kOperandA, out, size_t(B) * T * A) : nullptr;

#pragma omp parallel for schedule(dynamic, 1)
  for (int pair = 0; pair < B * H; ++pair) {
    const int b = pair / H, h = pair % H;
    const float* q = qkv + static_cast<size_t>(b) * T * ld_qkv + h * hs;
    const float* k = q + A;
    const float* v = q + 2 * A;
    float* o = out + static_cast<size_t>(b) * T * A + h * hs;
    float* row_lse = lse + static_cast<size_t>(pair) * T;
    float* strip = attention_scratch(omp_get_thread_num(), scratch_floats(T));
    float* multipliers = strip + size_t(3) * kRowBlock * T;

    for (int r0 = q_start; r0 < T; r0 += kRowBlock) {
      const int r1 = std::min(r0 + kRowBlock, T);  // rows r0..r1-1 see keys 0..r1-1
      cpu::sgemm_serial(false, true, r1 - r0, r1, hs, scale, q + static_cast<size_t>(r0) * ld_qkv,
                        ld_qkv, k, ld_qkv, 0.0f, strip, r1);
      for (int i = r0; i < r1; ++i) {
        float* p = strip + static_cast<size_t>(i - r0) * r1;
        row_lse[i] = causal_softmax_row(p, i, r1);
        if (dropout.active()) {  // the weights that multiply v; the backward pass redraws them
          draw_row_multipliers(multipliers, dropout, b, h, T, i);
#pragma omp simd
          for (int j = 0; j <= i; ++j) p[j] *= multipliers[j];
        }
      }
      cpu::sgemm_serial(false, false, r1 - r0, hs, r1, 1.0f, strip, r1, v, ld_qkv, 0.0f,
                        o + static_cast<size_t>(r0) * A, A);
      if (out16)
        round_rows(out16 + (o - out) + static_cast<size_t>(r0) * A, o + static_cast<size_t>(r0) * A,
                   r1 - r0, hs, A);
    }
  }
}

void CpuBackend::attention_backward(float* dqkv, const float* dout, const float* qkv,
                                    const float* lse, int B, int T, int H, int hs,
                                    const DropoutSpec& dropout) {
  const int A = H * hs, ld_qkv = 3 * A;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int t = 0; t < threads_; ++t) attention_scratch(t, scratch_floats(T));
  cpu::bf16* dqkv16 = bf16_output(kGradient, dqkv, size_t(B) * T * ld_qkv);

#pragma omp parallel for schedule(dynamic, 1)
  for (int pair = 0; pair < B * H; ++pair) {
    const int b = pair / H, h = pair % H;
    const size_t sample_offset = static_cast<size_t>(b) * T * ld_qkv + h * hs;
    const float* q = qkv + sample_offset;
    const float* k = q + A;
    const float* v = q + 2 * A;
    float* dq = dqkv + sample_offset;
    float* dk = dq + A;
    float* dv = dq + 2 * A;
    const float* d_o = dout + static_cast<size_t>(b) * T * A + h * hs;
    const float* row_lse = lse + static_cast<size_t>(pair) * T;

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
      cpu::sgemm_serial(false, true, rows, r1, hs, scale, q_rows, ld_qkv, k, ld_qkv, 0.0f, probs,
                        r1);
      // out = weights @ v:  d(weights) = d_out @ v^T.
      cpu::sgemm_serial(false, true, rows, r1, hs, 1.0f, d_o_rows, A, v, ld_qkv, 0.0f, grad, r1);
      for (int i = r0; i < r1; ++i) {
        float* p = probs + static_cast<size_t>(i - r0) * r1;
        float* g = grad + static_cast<size_t>(i - r0) * r1;
        const float log_sum_exp = row_lse[i];
#pragma omp simd
        for (int j = 0; j <= i; ++j) p[j] = cpu::vexp(p[j] - log_sum_exp);
        std::fill(p + i + 1, p + r1, 0.0f);
        if (dropout.active()) {
          float* w = dropped + static_cast<size_t>(i - r0) * r1;
          draw_row_multipliers(multipliers, dropout, b, h, T, i);
#pragma omp simd
          for (int j = 0; j <= i; ++j) {
            w[j] = p[j] * multipliers[j];
            g[j] *= multipliers[j];  // through the dropout: d(probabilities)
          }
          std::fill(w + i + 1, w + r1, 0.0f);
        }
        // Through the softmax: ds = p * (dp - sum_j p_j dp_j), times the score scale.
        const float p_dot_dp = cpu::row_dot(p, g, i + 1);
#pragma omp simd
        for (int j = 0; j <= i; ++j) g[j] = p[j] * (g[j] - p_dot_dp) * scale;
        std::fill(g + i + 1, g + r1, 0.0f);
      }
      // dv += weights^T @ d_out, over the keys the strip saw.
      cpu::sgemm_serial(true, false, r1, hs, rows, 1.0f, dropout.active() ? dropped : probs, r1,
                        d_o_rows, A, 1.0f, dv, ld_qkv);
      // scores = q @ k^T * scale:  dq = ds @ k (the strip's rows), dk += ds^T @ q.
      cpu::sgemm_serial(false, false, rows, hs, r1, 1.0f, grad, r1, k, ld_qkv, 0.0f,
                        dq + static_cast<size_t>(r0) * ld_qkv, ld_qkv);
      cpu::sgemm_serial(true, false, r1, hs, rows, 1.0f, grad, r1, q_rows, ld_qkv, 1.0f, dk,
                        ld_qkv);
    }
    if (dqkv16)  // the head's dq, dk and dv are final: round them for the qkv layer's products
      for (const float* part : {dq, dk, dv})
        round_rows(dqkv16 + (part - dqkv), part, T, hs, ld_qkv);
  }
}

}  // namespace folio
