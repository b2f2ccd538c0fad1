// Causal multi-head attention on the CPU (reference: backend/reference/attention.h).
//
// Threads take (sample, head) pairs; inside a pair the products are single-threaded sgemm calls
// on row blocks of kRowBlock queries, each reaching only as far right as its last query can see,
// so the masked upper triangle costs little beyond the diagonal blocks. The probabilities are
// kept (B, H, T, T) for the backward pass; dropout masks are drawn again there, not stored.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/vector_math.h"

namespace folio {

namespace {

constexpr int kRowBlock = 64;

// Row i of a T x T probability matrix: softmax over the scores s[0..i], zero after.
void causal_softmax_row(float* row, int i, int T) {
  float max_score = row[0];
  for (int j = 1; j <= i; ++j) max_score = std::max(max_score, row[j]);
  float total = 0.0f;
#pragma omp simd reduction(+ : total)
  for (int j = 0; j <= i; ++j) {
    row[j] = cpu::vexp(row[j] - max_score);
    total += row[j];
  }
  const float inverse = 1.0f / total;
#pragma omp simd
  for (int j = 0; j <= i; ++j) row[j] *= inverse;
  std::fill(row + i + 1, row + T, 0.0f);
}

// multipliers[i, j] = mask * 1/(1-p) for j <= i (rows first_row..T-1); zero for j > i.
void fill_dropout_multipliers(float* multipliers, const DropoutSpec& dropout, int b, int h, int T,
                              int first_row) {
  for (int i = first_row; i < T; ++i) {
    float* row = multipliers + static_cast<size_t>(i) * T;
    cpu::dropout_multipliers(row, dropout, static_cast<uint32_t>(b),
                             (static_cast<uint64_t>(h) * T + i) * T, static_cast<size_t>(i) + 1);
    std::fill(row + i + 1, row + T, 0.0f);
  }
}

}  // namespace

void CpuBackend::attention_forward(float* out, float* probs, const float* qkv, int B, int T, int H,
                                   int hs, int q_start, const DropoutSpec& dropout) {
  const int A = H * hs, ld_qkv = 3 * A;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const size_t TT = static_cast<size_t>(T) * T;
  for (int t = 0; t < threads_; ++t) attention_scratch(t, 2 * TT);

#pragma omp parallel for schedule(dynamic, 1)
  for (int pair = 0; pair < B * H; ++pair) {
    const int b = pair / H, h = pair % H;
    const float* q = qkv + static_cast<size_t>(b) * T * ld_qkv + h * hs;
    const float* k = q + A;
    const float* v = q + 2 * A;
    float* p = probs + static_cast<size_t>(pair) * TT;

    for (int r0 = q_start; r0 < T; r0 += kRowBlock) {
      const int r1 = std::min(r0 + kRowBlock, T);
      cpu::sgemm_serial(false, true, r1 - r0, r1, hs, scale, q + static_cast<size_t>(r0) * ld_qkv,
                        ld_qkv, k, ld_qkv, 0.0f, p + static_cast<size_t>(r0) * T, T);
    }
    for (int i = q_start; i < T; ++i) causal_softmax_row(p + static_cast<size_t>(i) * T, i, T);

    const float* weights = p;  // what multiplies v: the probabilities, after dropout
    if (dropout.active()) {
      float* multipliers = attention_scratch(omp_get_thread_num(), 2 * TT);
      float* dropped = multipliers + TT;
      fill_dropout_multipliers(multipliers, dropout, b, h, T, q_start);
      for (size_t e = static_cast<size_t>(q_start) * T; e < TT; ++e)
        dropped[e] = p[e] * multipliers[e];
      weights = dropped;
    }
    float* o = out + static_cast<size_t>(b) * T * A + h * hs;
    for (int r0 = q_start; r0 < T; r0 += kRowBlock) {
      const int r1 = std::min(r0 + kRowBlock, T);
      cpu::sgemm_serial(false, false, r1 - r0, hs, r1, 1.0f, weights + static_cast<size_t>(r0) * T,
                        T, v, ld_qkv, 0.0f, o + static_cast<size_t>(r0) * A, A);
    }
  }
}

void CpuBackend::attention_backward(float* dqkv, const float* dout, const float* qkv,
                                    const float* probs, int B, int T, int H, int hs,
                                    const DropoutSpec& dropout) {
  const int A = H * hs, ld_qkv = 3 * A;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const size_t TT = static_cast<size_t>(T) * T;
  for (int t = 0; t < threads_; ++t) attention_scratch(t, 3 * TT);

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
    const float* p = probs + static_cast<size_t>(pair) * TT;

    float* scratch = attention_scratch(omp_get_thread_num(), 3 * TT);
    float* multipliers = scratch;       // dropout mask * 1/(1-p)
    float* dropped = scratch + TT;      // the weights that multiplied v
    float* grad = scratch + 2 * TT;     // d(dropped), then d(scores)
    const float* weights = p;
    if (dropout.active()) {
      fill_dropout_multipliers(multipliers, dropout, b, h, T, 0);
      for (size_t e = 0; e < TT; ++e) dropped[e] = p[e] * multipliers[e];
      weights = dropped;
    }

    // out = weights @ v:  d(weights) = d_out @ v^T (rows), dv = weights^T @ d_out (columns).
    for (int r0 = 0; r0 < T; r0 += kRowBlock) {
      const int r1 = std::min(r0 + kRowBlock, T);
      cpu::sgemm_serial(false, true, r1 - r0, r1, hs, 1.0f, d_o + static_cast<size_t>(r0) * A, A,
                        v, ld_qkv, 0.0f, grad + static_cast<size_t>(r0) * T, T);
      cpu::sgemm_serial(true, false, r1 - r0, hs, T - r0, 1.0f,
                        weights + static_cast<size_t>(r0) * T + r0, T,
                        d_o + static_cast<size_t>(r0) * A, A, 0.0f,
                        dv + static_cast<size_t>(r0) * ld_qkv, ld_qkv);
    }
    // Through dropout and the softmax: ds = p * (dp - sum_j p_j dp_j), times the score scale.
    for (int i = 0; i < T; ++i) {
      const float* p_row = p + static_cast<size_t>(i) * T;
      float* g = grad + static_cast<size_t>(i) * T;
      if (dropout.active()) {
        const float* m_row = multipliers + static_cast<size_t>(i) * T;
#pragma omp simd
        for (int j = 0; j <= i; ++j) g[j] *= m_row[j];
      }
      float p_dot_dp = 0.0f;
#pragma omp simd reduction(+ : p_dot_dp)
      for (int j = 0; j <= i; ++j) p_dot_dp += p_row[j] * g[j];
#pragma omp simd
      for (int j = 0; j <= i; ++j) g[j] = p_row[j] * (g[j] - p_dot_dp) * scale;
      std::fill(g + i + 1, g + T, 0.0f);
    }
    // scores = q @ k^T:  dq = ds @ k (rows), dk = ds^T @ q (columns).
    for (int r0 = 0; r0 < T; r0 += kRowBlock) {
      const int r1 = std::min(r0 + kRowBlock, T);
      cpu::sgemm_serial(false, false, r1 - r0, hs, r1, 1.0f, grad + static_cast<size_t>(r0) * T,
                        T, k, ld_qkv, 0.0f, dq + static_cast<size_t>(r0) * ld_qkv, ld_qkv);
      cpu::sgemm_serial(true, false, r1 - r0, hs, T - r0, 1.0f,
                        grad + static_cast<size_t>(r0) * T + r0, T,
                        q + static_cast<size_t>(r0) * ld_qkv, ld_qkv, 0.0f,
                        dk + static_cast<size_t>(r0) * ld_qkv, ld_qkv);
    }
  }
}

}  // namespace folio
