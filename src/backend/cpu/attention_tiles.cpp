// Causal attention with bf16 products (--dtype bf16 on a CPU with AMX or AVX512-BF16: the two
// engines of bf16_tiles.h; see attention.cpp for the strips, the saved log-sum-exp and the
// recomputation, which are the same).
//
// The products take bf16 operands and sum in fp32, as PyTorch's bf16 autocast does for
// scaled_dot_product_attention; the softmax, the dropout and the softmax's backward stay fp32.
// Each (sample, head) pair first rounds its slices of q, k, v (and d_out) once into the layouts
// the tiles read (bf16_tiles.h): row-major for a left operand, "VNNI" panels for a right one.
// Then, per strip of query rows,
//   forward:  S = q k^T (strip x keys), P = softmax(S * scale) with dropout, out = P v;
//   backward: S and dP = d_out v^T again, dS from P and dP, then dq = dS k for the strip,
//             dk^T += q^T dS and dv^T += d_out^T P over the keys the strip saw.
// dk and dv are gathered transposed (head_size x keys) so that their right operand is the
// strip's own dS or P, packed straight from the rows just computed; a left operand must be
// row-major, and q^T, d_out^T are made once per pair instead of transposing every strip.
//
// Every dimension a tile covers is padded with zeros to a multiple of 32 (strip rows, keys) or
// is one already (head_size % 32 == 0, tiles_fit): padded rows and columns add nothing.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "backend/cpu/bf16_tiles.h"
#include "backend/cpu/attention_rows.h"
#include "backend/cpu/cpu_backend.h"

namespace folio {

namespace {

using attention_rows::attention_backward_row;
using attention_rows::causal_softmax_row;
using attention_rows::draw_row_multipliers;
using attention_rows::HeadSlices;

int round_up_32(int n) { return (n + 31) / 32 * 32; }

// Query rows per strip: half of attention.cpp's (attention_rows::kRowBlock). A strip's products run
// over every key up to its last row, so narrower strips skip more of the masked triangle (T = 64: a
// quarter of the work less), and the tiles' products, unlike sgemm, cost nothing more per call.
// `baby` bf16 (T = 64), --profile, alternating twice on an AMD EPYC Zen 4, 2 threads: attention
// forward 1.15 / 1.17 -> 0.95 / 0.95 ms a step, backward 2.24 / 2.28 -> 2.14 / 2.12 ms;
// shakespeare_char (T = 256) within noise. A multiple of 32: each strip is whole tiles.
constexpr int kStripRows = 32;

// Carves a thread's scratch into 64-byte aligned arrays (tile loads are fastest aligned).
class Carver {
 public:
  explicit Carver(float* scratch) : next_(reinterpret_cast<uintptr_t>(scratch)) {}
  template <typename T>
  T* take(size_t count) {
    next_ = (next_ + 63) / 64 * 64;
    T* taken = reinterpret_cast<T*>(next_);
    next_ += count * sizeof(T);
    return taken;
  }
  // Floats of scratch that `take`s of these byte counts need, alignment included.
  static size_t floats_for(std::initializer_list<size_t> bytes) {
    size_t total = 0;
    for (size_t b : bytes) total += b + 64;
    return total / sizeof(float) + 1;
  }

 private:
  uintptr_t next_;
};

// The strip's rows [rows, M) of a rows-by-width fp32 (or bf16) strip: zero, so that padding
// adds nothing where the strip is a product's inner dimension.
template <typename T>
void zero_padding_rows(T* strip, int rows, int M, int width) {
  std::fill(strip + static_cast<size_t>(rows) * width, strip + static_cast<size_t>(M) * width,
            T{0});
}

void round_row(cpu::bf16* to, const float* from, int n) {
#pragma omp simd
  for (int j = 0; j < n; ++j) to[j] = cpu::to_bf16(from[j]);
}

// Generation's few new query rows of one (sample, head) pair, rows q_start..T-1 with at most
// tiles::kMostVectorRows of them (one a token), against the key/value cache before them. The
// strips below would pad each product to 32 query rows and first pack every cached key and value
// of the pair into panels: work that grows with the context, for one row. Here the keys and values
// are read where they lie (tiles::rows_times_transposed for the scores, tiles::rows_times for
// P v), as bf16 when qkv is kept so (the cache of an inference plan), else rounded first. The
// numbers are the strips': bf16 products of the same rounded operands summed in fp32, the same
// fp32 softmax and dropout, P rounded to bf16 before it multiplies v; only the order of the sums
// differs.
struct FewRows {
  int T, q_start, hs, ld_qkv, A;
  float scale;
  int width() const { return (T + 15) / 16 * 16; }  // a row of scores or weights
  int rows() const { return T - q_start; }
  // Floats of a thread's scratch (Carver).
  size_t scratch_floats() const {
    const size_t hs_ = static_cast<size_t>(hs), T_ = static_cast<size_t>(T),
                 rows_ = cpu::tiles::kMostVectorRows, width_ = static_cast<size_t>(width());
    return Carver::floats_for({rows_ * hs_ * 2, T_ * hs_ * 2, T_ * hs_ * 2, rows_ * width_ * 4,
                               rows_ * width_ * 2, rows_ * hs_ * 4, width_ * 4});
  }
  // q points at the pair's q in row 0 (k A and v 2A columns after it); out32 and out16 at its
  // output in row q_start (either may be null).
  template <typename Source>  // float, or bf16 where qkv is kept so
  void attend(const Source* q, float* row_lse, float* out32, cpu::bf16* out16,
              const DropoutSpec& dropout, const cpu::MaskBits& masks, int b, int h,
              float* scratch) const {
    Carver carve(scratch);
    const size_t hs_ = static_cast<size_t>(hs), width_ = static_cast<size_t>(width());
    cpu::bf16* q16 = carve.take<cpu::bf16>(cpu::tiles::kMostVectorRows * hs_);
    cpu::bf16* keys16 = carve.take<cpu::bf16>(T * hs_);
    cpu::bf16* values16 = carve.take<cpu::bf16>(T * hs_);
    float* scores = carve.take<float>(cpu::tiles::kMostVectorRows * width_);  // then weights
    cpu::bf16* weights16 = carve.take<cpu::bf16>(cpu::tiles::kMostVectorRows * width_);
    float* o = carve.take<float>(cpu::tiles::kMostVectorRows * hs_);
    float* multipliers = carve.take<float>(width_);

    const cpu::bf16 *keys, *values;
    size_t ld_cache;
    if constexpr (std::is_same_v<Source, cpu::bf16>) {
      keys = q + A, values = q + 2 * A, ld_cache = ld_qkv;
    } else {
      cpu::tiles::round_rows(keys16, hs_, q + A, ld_qkv, T, hs, T);
      cpu::tiles::round_rows(values16, hs_, q + 2 * A, ld_qkv, T, hs, T);
      keys = keys16, values = values16, ld_cache = hs_;
    }
    cpu::tiles::round_rows(q16, hs_, q + static_cast<size_t>(q_start) * ld_qkv, ld_qkv, rows(), hs,
                           rows());
    // Every row's scores against all T keys: a row sees keys up to its own, and the softmax
    // zeroes the rest (at most kMostVectorRows - 1 of them).
    cpu::tiles::rows_times_transposed(rows(), 0, T, hs, q16, hs_, keys, ld_cache, scores, width_);
    for (int r = 0; r < rows(); ++r) {
      const int i = q_start + r;
      float* p = scores + r * width_;
      row_lse[i] = causal_softmax_row(p, i, T, scale);
      if (dropout.active()) {
        draw_row_multipliers(multipliers, dropout, b, h, T, i, masks);
#pragma omp simd
        for (int j = 0; j <= i; ++j) p[j] *= multipliers[j];
      }
      round_row(weights16 + r * width_, p, T);
    }
    cpu::tiles::rows_times(rows(), hs, T, weights16, width_, values, ld_cache, o, hs_);
    cpu::tiles::store_rows(out32, A, out16, o, hs_, rows(), hs);
  }
};

}  // namespace

void CpuBackend::attention_forward_tiles(float* out, float* lse, const float* qkv, int B, int T,
                                         int H, int hs, int q_start, const DropoutSpec& dropout,
                                         const cpu::MaskBits& masks) {
  const int A = H * hs, ld_qkv = 3 * A;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  // qkv and out may be tensors kept as bf16 (ProductOperand): q, k, v are then copied rather than
  // rounded, and out gets its bf16 rows alone. Otherwise the projection after attention reads all
  // of out: its bf16 copy is made here when all of it is written.
  const size_t out_count = size_t(B) * T * A;
  const cpu::bf16* kept_qkv = kept_in_bf16(qkv, size_t(B) * T * ld_qkv);
  cpu::bf16* kept_out = kept_in_bf16(out, out_count);
  cpu::bf16* out16 = kept_out       ? kept_out
                     : q_start == 0 ? bf16_output(kOperandA, out, out_count)
                                    : nullptr;
  float* out32 = kept_out ? nullptr : out;

  const FewRows few_rows{T, q_start, hs, ld_qkv, A, scale};
  if (few_rows.rows() <= cpu::tiles::kMostVectorRows &&
      cpu::tiles::engine_runs(cpu::tiles::Engine::avx512_bf16)) {
    for (int t = 0; t < threads_; ++t) attention_scratch(t, few_rows.scratch_floats());
#pragma omp parallel for schedule(dynamic, 1)
    for (int pair = 0; pair < B * H; ++pair) {
      const HeadSlices head(pair, T, H, hs);
      const size_t first = head.out + static_cast<size_t>(q_start) * A;
      float* scratch = attention_scratch(omp_get_thread_num(), few_rows.scratch_floats());
      const auto attend = [&](const auto* q) {
        few_rows.attend(q, lse + head.lse, out32 ? out32 + first : nullptr,
                        out16 ? out16 + first : nullptr, dropout, masks, head.b, head.h, scratch);
      };
      if (kept_qkv)
        attend(kept_qkv + head.q);
      else
        attend(qkv + head.q);
    }
    return;
  }

  const auto gemm = [engine = tiles_engine_](auto... arguments) {
    cpu::tiles::gemm(engine, arguments...);
  };
  const int Tp = round_up_32(T), Tq = Tp + 32;  // keys padded; query rows with a strip's padding
  const size_t hs_ = static_cast<size_t>(hs), Tp_ = static_cast<size_t>(Tp);
  const size_t scratch =
      Carver::floats_for({Tq * hs_ * 2, Tp_ * hs_ * 2, Tp_ * hs_ * 2, kStripRows * Tp_ * 4,
                          kStripRows * Tp_ * 2, kStripRows * hs_ * 4, Tp_ * 4});
  for (int t = 0; t < threads_; ++t) attention_scratch(t, scratch);

#pragma omp parallel for schedule(dynamic, 1)
  for (int pair = 0; pair < B * H; ++pair) {
    const HeadSlices head(pair, T, H, hs);
    const int b = head.b, h = head.h;
    float* row_lse = lse + head.lse;
    Carver carve(attention_scratch(omp_get_thread_num(), scratch));
    cpu::bf16* q16 = carve.take<cpu::bf16>(Tq * hs_);        // rows of q, row-major
    cpu::bf16* k_panels = carve.take<cpu::bf16>(Tp_ * hs_);  // k^T: head_size x keys
    cpu::bf16* v_panels = carve.take<cpu::bf16>(Tp_ * hs_);  // v: keys x head_size
    float* strip = carve.take<float>(kStripRows * Tp_);      // scores, then probabilities
    cpu::bf16* p16 = carve.take<cpu::bf16>(kStripRows * Tp_);
    float* o_strip = carve.take<float>(kStripRows * hs_);
    float* multipliers = carve.take<float>(Tp_);

    cpu::tiles::begin_products(tiles_engine_);
    const int rows_q = T - q_start;
    const auto load_head = [&](const auto* q) {  // fp32 or bf16
      cpu::tiles::round_rows(q16 + q_start * hs_, hs_, q + static_cast<size_t>(q_start) * ld_qkv,
                             ld_qkv, rows_q, hs, rows_q + 32);
      cpu::tiles::pack_panels_transposed(k_panels, 16 * hs_, q + A, ld_qkv, hs, T, hs, Tp);
      cpu::tiles::pack_panels(v_panels, 16 * Tp_, q + 2 * A, ld_qkv, T, hs, Tp, hs);
    };
    if (kept_qkv)
      load_head(kept_qkv + head.q);
    else
      load_head(qkv + head.q);

    for (int r0 = q_start; r0 < T; r0 += kStripRows) {
      const int r1 = std::min(r0 + kStripRows, T), rows = r1 - r0;
      const int M = round_up_32(rows), N = round_up_32(r1);  // rows r0..r1-1 see keys 0..r1-1
      gemm(M, N, hs, q16 + r0 * hs_, hs_, k_panels, 16 * hs_, strip, N, false);
      for (int i = r0; i < r1; ++i) {
        float* p = strip + static_cast<size_t>(i - r0) * N;
        row_lse[i] = causal_softmax_row(p, i, N, scale);
        if (dropout.active()) {  // the weights that multiply v; the backward pass recalls them
          draw_row_multipliers(multipliers, dropout, b, h, T, i, masks);
#pragma omp simd
          for (int j = 0; j <= i; ++j) p[j] *= multipliers[j];
        }
        round_row(p16 + static_cast<size_t>(i - r0) * N, p, N);
      }
      zero_padding_rows(p16, rows, M, N);
      gemm(M, hs, N, p16, N, v_panels, 16 * Tp_, o_strip, hs_, false);
      const size_t first = head.out + static_cast<size_t>(r0) * A;
      cpu::tiles::store_rows(out32 ? out32 + first : nullptr, A, out16 ? out16 + first : nullptr,
                             o_strip, hs_, rows, hs);
    }
    cpu::tiles::end_products(tiles_engine_);
  }
}

void CpuBackend::attention_backward_tiles(float* dqkv, const float* dout, const float* qkv,
                                          const float* lse, int B, int T, int H, int hs,
                                          const DropoutSpec& dropout, const cpu::MaskBits& masks,
                                          ReadBy dqkv_read_by) {
  const int A = H * hs, ld_qkv = 3 * A;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const auto gemm = [engine = tiles_engine_](auto... arguments) {
    cpu::tiles::gemm(engine, arguments...);
  };
  const int Tp = round_up_32(T), Tq = Tp + 32;
  const size_t hs_ = static_cast<size_t>(hs), Tp_ = static_cast<size_t>(Tp),
               Tq_ = static_cast<size_t>(Tq), strip_ = kStripRows * Tp_;
  const size_t scratch = Carver::floats_for(
      {Tq_ * hs_ * 2, Tq_ * hs_ * 2, Tp_ * hs_ * 2, Tp_ * hs_ * 2, Tp_ * hs_ * 2, hs_ * Tq_ * 2,
       hs_ * Tq_ * 2, hs_ * Tp_ * 4, hs_ * Tp_ * 4, strip_ * 4, strip_ * 4, strip_ * 4, strip_ * 2,
       strip_ * 2, strip_ * 2, kStripRows * hs_ * 4, Tp_ * 4});
  for (int t = 0; t < threads_; ++t) attention_scratch(t, scratch);
  // dqkv's bf16 copy, for the qkv layer's products; with bf16 products and ReadBy::kNextProduct
  // that copy alone (dqkv32 null): the fp32 rows, streamed to memory, were read by nothing.
  float* dqkv32 = dqkv;
  cpu::bf16* dqkv16 = bf16_output(kGradient, dqkv32, size_t(B) * T * ld_qkv, dqkv_read_by);
  const cpu::bf16* kept_qkv = kept_in_bf16(qkv, size_t(B) * T * ld_qkv);  // as in the forward

#pragma omp parallel for schedule(dynamic, 1)
  for (int pair = 0; pair < B * H; ++pair) {
    const HeadSlices head(pair, T, H, hs);
    const int b = head.b, h = head.h;
    const size_t dq = head.q, dk = dq + A, dv = dq + 2 * A;  // offsets in dqkv
    const float* d_o = dout + head.out;
    const float* row_lse = lse + head.lse;

    Carver carve(attention_scratch(omp_get_thread_num(), scratch));
    cpu::bf16* q16 = carve.take<cpu::bf16>(Tq_ * hs_);           // left operands, row-major
    cpu::bf16* d_o16 = carve.take<cpu::bf16>(Tq_ * hs_);
    cpu::bf16* k_t_panels = carve.take<cpu::bf16>(Tp_ * hs_);    // k^T, for S = q k^T
    cpu::bf16* v_t_panels = carve.take<cpu::bf16>(Tp_ * hs_);    // v^T, for dP = d_out v^T
    cpu::bf16* k_panels = carve.take<cpu::bf16>(Tp_ * hs_);      // k, for dq = dS k
    cpu::bf16* q_t16 = carve.take<cpu::bf16>(hs_ * Tq_);         // q^T, for dk^T = q^T dS
    cpu::bf16* d_o_t16 = carve.take<cpu::bf16>(hs_ * Tq_);       // d_out^T, for dv^T
    float* dk_t = carve.take<float>(hs_ * Tp_);                  // head_size x keys
    float* dv_t = carve.take<float>(hs_ * Tp_);
    float* probs = carve.take<float>(strip_);                    // S, then P
    float* grad = carve.take<float>(strip_);                     // dP, then dS
    float* dropped = carve.take<float>(strip_);                  // P with dropout
    cpu::bf16* grad16 = carve.take<cpu::bf16>(strip_);           // dS, row-major
    cpu::bf16* grad_panels = carve.take<cpu::bf16>(strip_);      // dS, right operand
    cpu::bf16* weight_panels = carve.take<cpu::bf16>(strip_);    // P with dropout, right operand
    float* dq_strip = carve.take<float>(kStripRows * hs_);
    float* multipliers = carve.take<float>(Tp_);

    // Where the head's gradient at an offset in dqkv goes: fp32 (unless only the copy is
    // written) and its bf16 copy (unless products are fp32).
    auto fp32_at = [&](size_t at) { return dqkv32 ? dqkv32 + at : nullptr; };
    auto copy16_at = [&](size_t at) { return dqkv16 ? dqkv16 + at : nullptr; };
    cpu::tiles::begin_products(tiles_engine_);
    const auto load_head = [&](const auto* q) {  // fp32 or bf16; k and v follow q in each row
      cpu::tiles::round_rows(q16, hs_, q, ld_qkv, T, hs, Tq);
      cpu::tiles::pack_panels_transposed(k_t_panels, 16 * hs_, q + A, ld_qkv, hs, T, hs, Tp);
      cpu::tiles::pack_panels_transposed(v_t_panels, 16 * hs_, q + 2 * A, ld_qkv, hs, T, hs, Tp);
      cpu::tiles::pack_panels(k_panels, 16 * Tp_, q + A, ld_qkv, T, hs, Tp, hs);
      cpu::tiles::round_transposed(q_t16, Tq_, q, ld_qkv, T, hs, Tq);
    };
    if (kept_qkv)
      load_head(kept_qkv + head.q);
    else
      load_head(qkv + head.q);
    cpu::tiles::round_rows(d_o16, hs_, d_o, A, T, hs, Tq);
    cpu::tiles::round_transposed(d_o_t16, Tq_, d_o, A, T, hs, Tq);
    std::fill_n(dk_t, hs_ * Tp_, 0.0f);
    std::fill_n(dv_t, hs_ * Tp_, 0.0f);

    for (int r0 = 0; r0 < T; r0 += kStripRows) {
      const int r1 = std::min(r0 + kStripRows, T), rows = r1 - r0;
      const int M = round_up_32(rows), N = round_up_32(r1);
      // The strip's scores again (P = exp(S * scale - lse)) and d(weights) = d_out v^T.
      gemm(M, N, hs, q16 + r0 * hs_, hs_, k_t_panels, 16 * hs_, probs, N, false);
      gemm(M, N, hs, d_o16 + r0 * hs_, hs_, v_t_panels, 16 * hs_, grad, N, false);
      for (int i = r0; i < r1; ++i) {
        const size_t offset = static_cast<size_t>(i - r0) * N;
        attention_backward_row({probs + offset, grad + offset, dropped + offset, i, row_lse[i]},
                               N, scale, scale, multipliers, dropout, masks, b, h, T);
        round_row(grad16 + offset, grad + offset, N);
      }
      float* weights = dropout.active() ? dropped : probs;
      zero_padding_rows(weights, rows, M, N);
      zero_padding_rows(grad, rows, M, N);
      zero_padding_rows(grad16, rows, M, N);
      // dv^T += d_out^T P and dk^T += q^T dS over the strip's rows; dq = dS k for its rows.
      cpu::tiles::pack_panels(weight_panels, 16 * static_cast<size_t>(M), weights, N, M, N, M, N);
      cpu::tiles::pack_panels(grad_panels, 16 * static_cast<size_t>(M), grad, N, M, N, M, N);
      gemm(hs, N, M, d_o_t16 + r0, Tq_, weight_panels, 16 * static_cast<size_t>(M), dv_t, Tp_,
           true);
      gemm(hs, N, M, q_t16 + r0, Tq_, grad_panels, 16 * static_cast<size_t>(M), dk_t, Tp_, true);
      gemm(M, hs, N, grad16, N, k_panels, 16 * Tp_, dq_strip, hs_, false);
      const size_t dq_rows = dq + static_cast<size_t>(r0) * ld_qkv;
      cpu::tiles::store_rows(fp32_at(dq_rows), ld_qkv, copy16_at(dq_rows), dq_strip, hs_, rows, hs);
    }
    cpu::tiles::end_products(tiles_engine_);
    // The head's dk and dv are final: back from head_size x keys, with their bf16 copies.
    cpu::tiles::transpose(fp32_at(dk), ld_qkv, copy16_at(dk), dk_t, Tp_, hs, T);
    cpu::tiles::transpose(fp32_at(dv), ld_qkv, copy16_at(dv), dv_t, Tp_, hs, T);
  }
}

}  // namespace folio
