// LayerNorm on the CPU (reference: backend/reference/layernorm.h), alone and fused with the
// residual add before it (reference: the two ops in turn, backend/reference/dropout_add.h).
//
// Rows are independent: threads take contiguous runs of rows. The fused ops make one pass over
// each row where the pair made two: the residual sum (or the gradient into the branch) is
// formed while the row is in L1, instead of being written and read again from memory. The
// parameter gradients are summed over rows in per-thread partials, then added in thread order so
// the result does not depend on scheduling.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/vector_math.h"
#include "backend/reference/layernorm.h"

namespace folio {

namespace {

// y = (x - mean) * rstd * weight + bias over one row of C; returns mean and rstd. y16, unless
// null, gets y rounded to bf16 (for the product that reads y next); y null: y16 alone (ReadBy).
void normalize_row(float* y, cpu::bf16* y16, float& mean, float& rstd, const float* x,
                   const float* weight, const float* bias, int C) {
  // The two sums in vector_math's lanes: GCC 12 ended each `omp simd reduction` here with its 16
  // lanes added one after another, about as long as the rest of a row of 128 (`baby`).
  const float m = cpu::row_sum(x, C) / C;
  const float squares = cpu::row_squared_deviations(x, m, C);
  const float s = 1.0f / std::sqrt(squares / C + static_cast<float>(reference::kLayerNormEps));
  mean = m;
  rstd = s;
  if (y == nullptr) {  // the same expressions as below, so the same roundings
    if (bias) {
#pragma omp simd
      for (int c = 0; c < C; ++c) y16[c] = cpu::to_bf16((x[c] - m) * s * weight[c] + bias[c]);
    } else {
#pragma omp simd
      for (int c = 0; c < C; ++c) y16[c] = cpu::to_bf16((x[c] - m) * s * weight[c]);
    }
    return;
  }
  if (bias) {
#pragma omp simd
    for (int c = 0; c < C; ++c) y[c] = (x[c] - m) * s * weight[c] + bias[c];
  } else {
#pragma omp simd
    for (int c = 0; c < C; ++c) y[c] = (x[c] - m) * s * weight[c];
  }
  if (y16) {
#pragma omp simd
    for (int c = 0; c < C; ++c) y16[c] = cpu::to_bf16(y[c]);
  }
}

// The dropout multipliers of rows first..last-1 (all of one sample) of a residual branch whose
// samples have rows_per_sample rows of C: row i's are elements (i mod rows_per_sample) * C .. + C
// of its sample's stream, so the rows' elements are consecutive and one draw makes them all. The
// forward pass draws them and records them in `masks` when it records; the backward pass recalls
// a row's from there, or draws them again when nothing was recorded.
void draw_rows_multipliers(float* multipliers, const DropoutSpec& dropout, int first, int last,
                           int rows_per_sample, int C, const cpu::MaskBits& masks) {
  const int sample = first / rows_per_sample, row = first % rows_per_sample;
  cpu::dropout_multipliers(multipliers, dropout, static_cast<uint32_t>(sample),
                           static_cast<uint64_t>(row) * C, static_cast<size_t>(last - first) * C);
  if (masks.recorded())
    for (int r = 0; r < last - first; ++r)
      cpu::store_mask_bits(masks.row(sample, row + r), multipliers + static_cast<size_t>(r) * C,
                           C);
}
void recall_row_multipliers(float* multipliers, const DropoutSpec& dropout, int i,
                            int rows_per_sample, int C, const cpu::MaskBits& masks) {
  if (masks.recorded())
    cpu::load_mask_bits(multipliers, masks.row(i / rows_per_sample, i % rows_per_sample), C,
                        dropout.scale());
  else
    draw_rows_multipliers(multipliers, dropout, i, i + 1, rows_per_sample, C, masks);
}

// A row's two sums in LayerNorm's backward pass: of g = dy * weight, and of g * (x - mean) * rstd.
// AVX-512 and AVX2: in vector lanes added as a tree at the end (see normalize_row).
void backward_row_sums(const float* dy, const float* weight, const float* x, float m, float s,
                       int C, float& g_sum, float& gn_sum) {
#if defined(__AVX512F__) || defined(__AVX2__)
  using namespace cpu::simd;
  const Vector mean = broadcast(m), rstd = broadcast(s);
  LaneSums g_sums, gn_sums;
  for (int c0 = 0; c0 < C; c0 += cpu::kLanes)
#pragma GCC unroll 2
    for (int q = 0; q < LaneSums::kParts; ++q) {  // a block's vectors (LaneSums)
      const int c = c0 + q * kVectorLanes;
      const Mask in_row = lanes_of(C - c);  // none past C: g = 0 there
      const Vector g = multiply(load_lanes(dy + c, in_row), load_lanes(weight + c, in_row));
      g_sums.add(q, g);
      const Vector centered = subtract(load_lanes(x + c, in_row), mean);
      gn_sums.multiply_add(q, multiply(g, centered), rstd);
    }
  g_sum = g_sums.total();
  gn_sum = gn_sums.total();
#else
  float g_total = 0.0f, gn_total = 0.0f;
#pragma omp simd reduction(+ : g_total, gn_total)
  for (int c = 0; c < C; ++c) {
    const float g = dy[c] * weight[c];
    g_total += g;
    gn_total += g * (x[c] - m) * s;
  }
  g_sum = g_total;
  gn_sum = gn_total;
#endif
}

}  // namespace

void CpuBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                   const float* weight, const float* bias, int N, int C,
                                   ReadBy out_read_by) {
  cpu::bf16* out16 = bf16_output(kOperandA, out, static_cast<size_t>(N) * C, out_read_by);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i)
    normalize_row(out ? out + static_cast<size_t>(i) * C : nullptr,
                  out16 ? out16 + static_cast<size_t>(i) * C : nullptr, mean[i], rstd[i],
                  inp + static_cast<size_t>(i) * C, weight, bias, C);
}

void CpuBackend::dropout_add_layernorm_forward(float* residual_out, float* ln_out, float* mean,
                                               float* rstd, const float* residual,
                                               const float* branch, const float* weight,
                                               const float* bias, int B, size_t per_sample, int C,
                                               const DropoutSpec& dropout, ReadBy ln_out_read_by) {
  const int N = static_cast<int>(B * per_sample / C);
  const int rows_per_sample = static_cast<int>(per_sample / C);
  cpu::bf16* ln_out16 = bf16_output(kOperandA, ln_out, static_cast<size_t>(N) * C, ln_out_read_by);
  const cpu::MaskBits masks = dropout.active()
                                  ? dropout_masks_.record(dropout, B, rows_per_sample, C)
                                  : cpu::MaskBits{};
  // Short rows (tiny's 32) draw their multipliers several rows at a time, 512 or more a draw:
  // a draw of a single row of 32 cost as much as one of hundreds (the vector Philox kernel makes
  // 64 words a call).
  const int rows_per_draw = dropout.active() ? std::clamp(512 / C, 1, rows_per_sample) : 1;
  const int draws_per_sample = (rows_per_sample + rows_per_draw - 1) / rows_per_draw;
#pragma omp parallel
  {
    std::vector<float> multipliers(dropout.active() ? size_t(rows_per_draw) * C : 0);
#pragma omp for schedule(static)
    for (int group = 0; group < B * draws_per_sample; ++group) {
      const int sample = group / draws_per_sample;
      const int first = sample * rows_per_sample + (group % draws_per_sample) * rows_per_draw;
      const int last = std::min(first + rows_per_draw, (sample + 1) * rows_per_sample);
      if (dropout.active())
        draw_rows_multipliers(multipliers.data(), dropout, first, last, rows_per_sample, C, masks);
      for (int i = first; i < last; ++i) {
        const size_t offset = static_cast<size_t>(i) * C;
        float* x = residual_out + offset;
        if (dropout.active()) {
          const float* m = multipliers.data() + static_cast<size_t>(i - first) * C;
#pragma omp simd
          for (int c = 0; c < C; ++c) x[c] = residual[offset + c] + branch[offset + c] * m[c];
        } else {
#pragma omp simd
          for (int c = 0; c < C; ++c) x[c] = residual[offset + c] + branch[offset + c];
        }
        normalize_row(ln_out ? ln_out + offset : nullptr,
                      ln_out16 ? ln_out16 + offset : nullptr, mean[i], rstd[i], x, weight, bias, C);
      }
    }
  }
}

void CpuBackend::layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                    const float* inp, const float* weight, const float* mean,
                                    const float* rstd, int N, int C) {
  layernorm_dropout_add_backward(dinp, nullptr, dweight, dbias, dout, inp, weight, mean, rstd, N,
                                 static_cast<size_t>(C), C, no_dropout());
}

// Both backward passes: the plain one (dbranch null) and the fused one, which goes on from each
// row's updated dinp into the residual branch: dbranch = dinp * mask / (1 - p).
void CpuBackend::layernorm_dropout_add_backward(float* dinp, float* dbranch, float* dweight,
                                                float* dbias, const float* dout, const float* inp,
                                                const float* weight, const float* mean,
                                                const float* rstd, int B, size_t per_sample, int C,
                                                const DropoutSpec& dropout) {
  const int N = static_cast<int>(B * per_sample / C);
  const int rows_per_sample = static_cast<int>(per_sample / C);
  // Per-thread partial sums of dweight and dbias, side by side.
  float* partials = thread_partials(size_t(2) * C);
  cpu::bf16* dbranch16 =
      dbranch ? bf16_output(kGradient, dbranch, static_cast<size_t>(N) * C) : nullptr;
  const cpu::MaskBits masks = dbranch && dropout.active()
                                  ? dropout_masks_.find(dropout, B, rows_per_sample, C)
                                  : cpu::MaskBits{};
#pragma omp parallel num_threads(threads_)
  {
    float* my_dweight = partials + size_t(2) * C * omp_get_thread_num();
    float* my_dbias = my_dweight + C;
    std::vector<float> multipliers(dbranch && dropout.active() ? C : 0);
#pragma omp for schedule(static)
    for (int i = 0; i < N; ++i) {
      const size_t offset = static_cast<size_t>(i) * C;
      const float* x = inp + offset;
      const float* dy = dout + offset;
      const float m = mean[i], s = rstd[i];
      float g_sum, gn_sum;
      backward_row_sums(dy, weight, x, m, s, C, g_sum, gn_sum);
      const float g_mean = g_sum / C, gn_mean = gn_sum / C;
      float* dx = dinp + offset;
#pragma omp simd
      for (int c = 0; c < C; ++c) {
        const float n = (x[c] - m) * s;
        dx[c] += s * (dy[c] * weight[c] - g_mean - n * gn_mean);
        my_dweight[c] += dy[c] * n;
        my_dbias[c] += dy[c];
      }
      if (dbranch == nullptr) continue;
      float* db = dbranch + offset;
      if (dropout.active()) {
        recall_row_multipliers(multipliers.data(), dropout, i, rows_per_sample, C, masks);
#pragma omp simd
        for (int c = 0; c < C; ++c) db[c] = dx[c] * multipliers[c];
      } else {
        std::copy_n(dx, C, db);
      }
      if (dbranch16) {
        cpu::bf16* db16 = dbranch16 + offset;
#pragma omp simd
        for (int c = 0; c < C; ++c) db16[c] = cpu::to_bf16(db[c]);
      }
    }
  }
  for (int t = 0; t < threads_; ++t) {
    const float* part = partials + size_t(2) * C * t;
    for (int c = 0; c < C; ++c) {
      dweight[c] += part[c];
      if (dbias) dbias[c] += part[C + c];
    }
  }
}

}  // namespace folio
