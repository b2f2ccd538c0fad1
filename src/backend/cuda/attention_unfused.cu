// Attention that writes out the (B, H, T, T) matrices, as an eager framework runs it: the rung
// before flash attention in `folio bench --ladder`, and the path for head sizes above 128. The
// products are batched cuBLASLt calls over the B * H heads, so q, k, v and dout are first copied
// into a head-major layout (B * H, T, hs). Saves the probabilities before dropout.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace folio {

namespace {

using cuda::bf16;
using cuda::kWarpSize;

__device__ __forceinline__ void store_as(float* out, float value) {
  *out = value;
}
__device__ __forceinline__ void store_as(bf16* out, float value) {
  *out = __float2bfloat16(value);
}

// heads[part][b, h][t][d] = x[b, t][part * A + h * hs + d] for x of `parts` (B, T, A) blocks.
template <typename Out>
__global__ void split_heads_kernel(Out* heads, const float* x, int B, int T, int parts, int H,
                                   int hs) {
  const int A = H * hs;
  const size_t total = size_t(B) * T * parts * A;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total;
       e += size_t(gridDim.x) * blockDim.x) {
    const int column = static_cast<int>(e % (parts * A));
    const size_t bt = e / (parts * A);
    const int b = static_cast<int>(bt / T), t = static_cast<int>(bt % T);
    const int part = column / A, h = (column % A) / hs, d = column % hs;
    store_as(&heads[(((size_t(part) * B + b) * H + h) * T + t) * hs + d], x[e]);
  }
}

// The inverse, for rows t >= first_row; with a bf16 copy when asked.
__global__ void merge_heads_kernel(float* x, bf16* x_bf16, const float* heads, int B, int T,
                                   int parts, int H, int hs, int first_row) {
  const int A = H * hs;
  const int rows = T - first_row;
  const size_t total = size_t(B) * rows * parts * A;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total;
       e += size_t(gridDim.x) * blockDim.x) {
    const int column = static_cast<int>(e % (parts * A));
    const size_t row = e / (parts * A);
    const int b = static_cast<int>(row / rows), t = first_row + static_cast<int>(row % rows);
    const int part = column / A, h = (column % A) / hs, d = column % hs;
    const size_t at = (size_t(b) * T + t) * parts * A + column;
    const float value = heads[(((size_t(part) * B + b) * H + h) * T + t) * hs + d];
    x[at] = value;
    if (x_bf16) x_bf16[at] = __float2bfloat16(value);
  }
}

// The row of the (B, H, T, T) weights a warp works on: one warp per (b, h, i).
struct WeightsRow {
  size_t row;  // (b H + h) T + i
  int b, h, i, lane;
  uint64_t mask_row;  // element (h T + i) T of sample b's mask
  bool valid;
};

__device__ WeightsRow weights_row(int B, int H, int T) {
  WeightsRow w;
  w.row = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) / kWarpSize;
  w.lane = threadIdx.x % kWarpSize;
  w.valid = w.row < size_t(B) * H * T;
  w.i = static_cast<int>(w.row % T);
  w.h = static_cast<int>((w.row / T) % H);
  w.b = static_cast<int>(w.row / (size_t(T) * H));
  w.mask_row = (uint64_t(w.h) * T + w.i) * T;
  return w;
}

// Row (b, h, i) of the scores (already scaled) becomes the causal softmax, in place, and the
// dropped weights that multiply v. Rows before first_row are left alone.
template <typename Out>
__global__ void causal_softmax_kernel(float* probs, Out* dropped, int B, int H, int T,
                                      int first_row, cuda::KernelDropout dropout) {
  const WeightsRow w = weights_row(B, H, T);
  if (!w.valid || w.i < first_row) return;
  float* p = probs + w.row * T;
  Out* weights = dropped + w.row * T;
  float row_max = -INFINITY;
  for (int j = w.lane; j <= w.i; j += kWarpSize) row_max = fmaxf(row_max, p[j]);
  row_max = cuda::warp_max(row_max);
  float total = 0.0f;
  for (int j = w.lane; j <= w.i; j += kWarpSize) total += expf(p[j] - row_max);
  const float inverse = 1.0f / cuda::warp_sum(total);
  const DropoutSpec spec = dropout.resolve();
  cuda::DropoutCursor mask(spec, static_cast<uint32_t>(w.b));
  for (int j0 = 4 * w.lane; j0 < T; j0 += 4 * kWarpSize)
    for (int j = j0; j < min(j0 + 4, T); ++j) {
      const float value = j <= w.i ? expf(p[j] - row_max) * inverse : 0.0f;
      p[j] = value;
      store_as(&weights[j],
               spec.active() && value > 0.0f ? value * mask.multiplier(w.mask_row + j) : value);
    }
}

// The backward pass's dropped weights again, from the saved probabilities.
template <typename Out>
__global__ void dropped_weights_kernel(Out* dropped, const float* probs, int B, int H, int T,
                                       cuda::KernelDropout dropout) {
  const WeightsRow w = weights_row(B, H, T);
  if (!w.valid) return;
  const DropoutSpec spec = dropout.resolve();
  cuda::DropoutCursor mask(spec, static_cast<uint32_t>(w.b));
  for (int j0 = 4 * w.lane; j0 < T; j0 += 4 * kWarpSize)
    for (int j = j0; j < min(j0 + 4, T); ++j) {
      const float value = probs[w.row * T + j];
      store_as(&dropped[w.row * T + j],
               spec.active() && value > 0.0f ? value * mask.multiplier(w.mask_row + j) : value);
    }
}

// ds = p (m dp~ - sum_j p m dp~) scale, from the gradient dp~ of the dropped weights.
template <typename Out>
__global__ void softmax_backward_kernel(Out* dscores, const float* probs, const float* d_dropped,
                                        int B, int H, int T, float scale,
                                        cuda::KernelDropout dropout) {
  const WeightsRow w = weights_row(B, H, T);
  if (!w.valid) return;
  const DropoutSpec spec = dropout.resolve();
  const float* p = probs + w.row * T;
  const float* dpt = d_dropped + w.row * T;
  cuda::DropoutCursor mask(spec, static_cast<uint32_t>(w.b));
  auto multiplier = [&](int j) { return spec.active() ? mask.multiplier(w.mask_row + j) : 1.0f; };
  float dot = 0.0f;
  for (int j0 = 4 * w.lane; j0 <= w.i; j0 += 4 * kWarpSize)
    for (int j = j0; j < min(j0 + 4, w.i + 1); ++j) dot += p[j] * multiplier(j) * dpt[j];
  dot = cuda::warp_sum(dot);
  for (int j0 = 4 * w.lane; j0 < T; j0 += 4 * kWarpSize)
    for (int j = j0; j < min(j0 + 4, T); ++j) {
      const float ds = j <= w.i ? p[j] * (multiplier(j) * dpt[j] - dot) * scale : 0.0f;
      store_as(&dscores[w.row * T + j], ds);
    }
}

unsigned grid_for_warps(size_t warps) {
  return cuda::blocks_for(warps * kWarpSize, cuda::kBlockThreads);
}

unsigned grid_for_elements(size_t elements) {
  return std::min<unsigned>(cuda::blocks_for(elements, cuda::kBlockThreads), 65535u * 8);
}

// One product per head, out[head] (M x N, heads one after the other) = op(a[head]) op(b[head]).
cuda::GemmRequest head_products(int heads, int M, int N, int K, cuda::GemmPrecision precision,
                                cuda::GemmOperand a, cuda::GemmOperand b, float* out) {
  return {.M = M,
          .N = N,
          .K = K,
          .batch = heads,
          .precision = precision,
          .a = a,
          .b = b,
          .out = out,
          .ld_out = N,
          .out_batch_stride = int64_t(M) * N};
}

// Head-major (B * H, T, hs) views of q, k, v (and dout) in the product's operand type.
struct HeadViews {
  const void* q;
  const void* k;
  const void* v;
  const void* dout;
};

}  // namespace

void CudaBackend::unfused_attention_forward(float* out, float* probs, const float* qkv, int B,
                                            int T, int H, int hs, int q_start,
                                            const DropoutSpec& dropout) {
  const bool bf16_operands = bf16_product({hs, T});
  const size_t element = bf16_operands ? sizeof(bf16) : sizeof(float);
  const size_t head_floats = size_t(B) * H * T * hs, weights = size_t(B) * H * T * T;
  char* heads = static_cast<char*>(scratch(Scratch::kAttentionHeads, 4 * head_floats * element));
  void* dropped = scratch(Scratch::kAttentionWeights, weights * element);
  auto* outputs =
      static_cast<float*>(scratch(Scratch::kAttentionHeadOutputs, 3 * head_floats * sizeof(float)));
  const cuda::KernelDropout kernel_dropout{dropout, live_dropout_step()};
  const HeadViews view{heads, heads + head_floats * element, heads + 2 * head_floats * element,
                       nullptr};
  wrote(probs, weights * sizeof(float));

  const unsigned split_grid = grid_for_elements(size_t(B) * T * 3 * H * hs);
  if (bf16_operands) {
    split_heads_kernel<<<split_grid, cuda::kBlockThreads, 0, stream_>>>(
        reinterpret_cast<bf16*>(heads), qkv, B, T, 3, H, hs);
  } else {
    split_heads_kernel<<<split_grid, cuda::kBlockThreads, 0, stream_>>>(
        reinterpret_cast<float*>(heads), qkv, B, T, 3, H, hs);
  }
  check_launch("split_heads");

  // scores = q k^T / sqrt(hs), into the saved probabilities
  const int64_t head_stride = int64_t(T) * hs, weight_stride = int64_t(T) * T;
  const cuda::GemmPrecision products = precision(bf16_operands);
  cuda::GemmRequest scores =
      head_products(B * H, T, T, hs, products, {view.q, hs, false, head_stride},
                    {view.k, hs, true, head_stride}, probs);
  scores.alpha = 1.0f / std::sqrt(static_cast<float>(hs));
  run_gemm(scores);

  const unsigned row_grid = grid_for_warps(size_t(B) * H * T);
  if (bf16_operands) {
    causal_softmax_kernel<<<row_grid, cuda::kBlockThreads, 0, stream_>>>(
        probs, static_cast<bf16*>(dropped), B, H, T, q_start, kernel_dropout);
  } else {
    causal_softmax_kernel<<<row_grid, cuda::kBlockThreads, 0, stream_>>>(
        probs, static_cast<float*>(dropped), B, H, T, q_start, kernel_dropout);
  }
  check_launch("causal_softmax");

  // out = dropout(p) v
  run_gemm(head_products(B * H, T, hs, T, products, {dropped, T, false, weight_stride},
                         {view.v, hs, false, head_stride}, outputs));

  const size_t out_floats = size_t(B) * T * H * hs;
  bf16* out_bf16 = nullptr;
  if (q_start == 0) {
    out_bf16 = bf16_output(out, out_floats);
  } else {
    wrote(out, out_floats * sizeof(float));
  }
  merge_heads_kernel<<<grid_for_elements(size_t(B) * (T - q_start) * H * hs), cuda::kBlockThreads,
                       0, stream_>>>(out, out_bf16, outputs, B, T, 1, H, hs, q_start);
  check_launch("merge_heads");
}

void CudaBackend::unfused_attention_backward(float* dqkv, const float* dout, const float* qkv,
                                             const float* probs, int B, int T, int H, int hs,
                                             const DropoutSpec& dropout) {
  const bool bf16_operands = bf16_product({hs, T});
  const size_t element = bf16_operands ? sizeof(bf16) : sizeof(float);
  const size_t head_floats = size_t(B) * H * T * hs, weights = size_t(B) * H * T * T;
  char* heads = static_cast<char*>(scratch(Scratch::kAttentionHeads, 4 * head_floats * element));
  void* dropped = scratch(Scratch::kAttentionWeights, weights * element);
  auto* d_dropped =
      static_cast<float*>(scratch(Scratch::kAttentionScratch, weights * sizeof(float)));
  auto* grads =
      static_cast<float*>(scratch(Scratch::kAttentionHeadOutputs, 3 * head_floats * sizeof(float)));
  const cuda::KernelDropout kernel_dropout{dropout, live_dropout_step()};
  const HeadViews view{heads, heads + head_floats * element, heads + 2 * head_floats * element,
                       heads + 3 * head_floats * element};
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));

  const unsigned split_grid = grid_for_elements(size_t(B) * T * 3 * H * hs);
  const unsigned dout_grid = grid_for_elements(size_t(B) * T * H * hs);
  const unsigned row_grid = grid_for_warps(size_t(B) * H * T);
  if (bf16_operands) {
    split_heads_kernel<<<split_grid, cuda::kBlockThreads, 0, stream_>>>(
        reinterpret_cast<bf16*>(heads), qkv, B, T, 3, H, hs);
    split_heads_kernel<<<dout_grid, cuda::kBlockThreads, 0, stream_>>>(
        reinterpret_cast<bf16*>(heads + 3 * head_floats * element), dout, B, T, 1, H, hs);
    dropped_weights_kernel<<<row_grid, cuda::kBlockThreads, 0, stream_>>>(
        static_cast<bf16*>(dropped), probs, B, H, T, kernel_dropout);
  } else {
    split_heads_kernel<<<split_grid, cuda::kBlockThreads, 0, stream_>>>(
        reinterpret_cast<float*>(heads), qkv, B, T, 3, H, hs);
    split_heads_kernel<<<dout_grid, cuda::kBlockThreads, 0, stream_>>>(
        reinterpret_cast<float*>(heads + 3 * head_floats * element), dout, B, T, 1, H, hs);
    dropped_weights_kernel<<<row_grid, cuda::kBlockThreads, 0, stream_>>>(
        static_cast<float*>(dropped), probs, B, H, T, kernel_dropout);
  }
  check_launch("split_heads and dropped_weights");

  float* dq = grads;
  float* dk = grads + head_floats;
  float* dv = grads + 2 * head_floats;
  const cuda::GemmPrecision products = precision(bf16_operands);
  auto batched = [&](int M, int N, int K, cuda::GemmOperand a, cuda::GemmOperand b, float* out) {
    run_gemm(head_products(B * H, M, N, K, products, a, b, out));
  };
  const int64_t head_stride = int64_t(T) * hs, weight_stride = int64_t(T) * T;
  // dv = dropout(p)^T dout;  d(dropout(p)) = dout v^T
  batched(T, hs, T, {dropped, T, true, weight_stride}, {view.dout, hs, false, head_stride}, dv);
  batched(T, T, hs, {view.dout, hs, false, head_stride}, {view.v, hs, true, head_stride},
          d_dropped);
  // ds (written over the dropped weights, no longer needed), then dq = ds k, dk = ds^T q
  if (bf16_operands) {
    softmax_backward_kernel<<<row_grid, cuda::kBlockThreads, 0, stream_>>>(
        static_cast<bf16*>(dropped), probs, d_dropped, B, H, T, scale, kernel_dropout);
  } else {
    softmax_backward_kernel<<<row_grid, cuda::kBlockThreads, 0, stream_>>>(
        static_cast<float*>(dropped), probs, d_dropped, B, H, T, scale, kernel_dropout);
  }
  check_launch("softmax_backward");
  batched(T, hs, T, {dropped, T, false, weight_stride}, {view.k, hs, false, head_stride}, dq);
  batched(T, hs, T, {dropped, T, true, weight_stride}, {view.q, hs, false, head_stride}, dk);

  bf16* dqkv_bf16 = bf16_output(dqkv, size_t(B) * T * 3 * H * hs);
  merge_heads_kernel<<<split_grid, cuda::kBlockThreads, 0, stream_>>>(dqkv, dqkv_bf16, grads, B, T,
                                                                      3, H, hs, 0);
  check_launch("merge_heads");
}

}  // namespace folio
