// Cross-entropy on the GPU (reference: backend/reference/cross_entropy.h): one warp per row of
// logits, Vp wide, the softmax over the first V (the rest is vocabulary padding, gradient 0).
// Neither direction stores the probabilities: the backward pass recomputes each row's statistics,
// which costs one read of the logits instead of a write and a read of (N, V).
//
// Each pass over a row gathers its maximum and sum together (SoftmaxStatistics, online softmax),
// four columns a load where the rows allow: the forward reads each row once and the backward
// twice, where a maximum, then a sum, then the gradient read it three times. At GPT-2's width
// (50,304 columns, 200 KB a row, a warp a row: far more rows in flight than the L2 cache holds)
// every pass reads from memory: 3.3 GB for 16 x 1024 tokens.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernel_helpers.cuh"
#include "core/softmax_statistics.h"

namespace folio {

namespace {

using cuda::kWarpSize;

// The statistics of z[0, V), every lane of the warp holding them: each lane gathers its columns
// (quads q = lane, lane + 32, ... where `by_quads`: Vp a multiple of 4 and rows on 16-byte
// boundaries; else columns v = lane, lane + 32, ...), then the lanes merge by a butterfly.
__device__ SoftmaxStatistics row_statistics(const float* z, int V, bool by_quads, int lane) {
  SoftmaxStatistics s;
  if (by_quads) {
    const float4* quads = reinterpret_cast<const float4*>(z);
    for (int q = lane; 4 * q < V; q += kWarpSize) {
      const float4 x = quads[q];
      const int v = 4 * q;
      add_to_statistics(s, x.x);
      if (v + 1 < V) add_to_statistics(s, x.y);
      if (v + 2 < V) add_to_statistics(s, x.z);
      if (v + 3 < V) add_to_statistics(s, x.w);
    }
  } else {
    for (int v = lane; v < V; v += kWarpSize) add_to_statistics(s, z[v]);
  }
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const SoftmaxStatistics other{cuda::shuffle_xor(s.max, offset),
                                  cuda::shuffle_xor(s.sum, offset)};
    s = combine_statistics(s, other);
  }
  return s;
}

// losses[i] = log(sum exp(z)) - z[target]
__global__ void cross_entropy_forward_kernel(float* losses, const float* logits,
                                             const int32_t* targets, int N, int V, int Vp,
                                             bool by_quads) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const float* z = logits + size_t(row) * Vp;
  const SoftmaxStatistics s = row_statistics(z, V, by_quads, lane);
  if (lane == 0) losses[row] = log_sum_exp(s) - z[targets[row]];
}

// The gradient of column v of a row: (softmax(z)[v] - onehot(target)[v]) * dloss, 0 in the padding
__device__ __forceinline__ float logit_gradient(float z, int v, const SoftmaxStatistics& s,
                                                int target, int V, float dloss) {
  if (v >= V) return 0.0f;
  return (expf(z - s.max) / s.sum - (v == target ? 1.0f : 0.0f)) * dloss;
}

// dlogits = (softmax(z) - onehot(target)) * dloss; dlogits null: its bf16 copy alone
__global__ void cross_entropy_backward_kernel(float* dlogits, cuda::bf16* dlogits_bf16,
                                              const float* logits, const int32_t* targets, int N,
                                              int V, int Vp, float dloss, bool by_quads) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const size_t offset = size_t(row) * Vp;
  const SoftmaxStatistics s = row_statistics(logits + offset, V, by_quads, lane);
  const int target = targets[row];
  if (by_quads) {
    const auto* z = reinterpret_cast<const float4*>(logits + offset);
    for (int q = lane; 4 * q < Vp; q += kWarpSize) {
      const float4 x = z[q];
      const int v = 4 * q;
      const float4 g = make_float4(logit_gradient(x.x, v, s, target, V, dloss),
                                   logit_gradient(x.y, v + 1, s, target, V, dloss),
                                   logit_gradient(x.z, v + 2, s, target, V, dloss),
                                   logit_gradient(x.w, v + 3, s, target, V, dloss));
      if (dlogits) reinterpret_cast<float4*>(dlogits + offset)[q] = g;
      if (dlogits_bf16) {
        auto* pairs = reinterpret_cast<__nv_bfloat162*>(dlogits_bf16 + offset + v);
        pairs[0] = __floats2bfloat162_rn(g.x, g.y);
        pairs[1] = __floats2bfloat162_rn(g.z, g.w);
      }
    }
    return;
  }
  for (int v = lane; v < Vp; v += kWarpSize) {
    const float g = logit_gradient(logits[offset + v], v, s, target, V, dloss);
    if (dlogits) dlogits[offset + v] = g;
    if (dlogits_bf16) dlogits_bf16[offset + v] = __float2bfloat16(g);
  }
}

unsigned grid_for_rows(int N) {
  return cuda::blocks_for(size_t(N) * kWarpSize, cuda::kBlockThreads);
}

}  // namespace

void CudaBackend::cross_entropy_forward(float* losses, const float* logits, const int32_t* targets,
                                        int N, int V, int Vp) {
  if (N == 0) return;
  wrote(losses, N * sizeof(float));
  const bool by_quads = Vp % 4 == 0 && cuda::all_16_byte_aligned({logits});
  cross_entropy_forward_kernel<<<grid_for_rows(N), cuda::kBlockThreads, 0, stream_>>>(
      losses, logits, targets, N, V, Vp, by_quads);
  check_launch("cross_entropy_forward");
}

void CudaBackend::cross_entropy_backward(float* dlogits, const float* logits,
                                         const int32_t* targets, int N, int V, int Vp, float dloss,
                                         ReadBy dlogits_read_by) {
  if (N == 0) return;
  // The lm_head's products alone read the gradient (ReadBy::kNextProduct): its bf16 copy alone
  // where one is kept (dlogits becomes null; in place, the logits stay as they were), 2 bytes an
  // element written where the fp32 values and the copy took 6: 3.3 GB less for GPT-2's 16 x 1024.
  cuda::bf16* dlogits_bf16 = bf16_output(dlogits, size_t(N) * Vp, dlogits_read_by);
  // (a bf16 row of Vp a multiple of 4 starts on an 8-byte boundary: the pairs' stores need 4)
  const bool by_quads = Vp % 4 == 0 && cuda::all_16_byte_aligned({logits, dlogits, dlogits_bf16});
  cross_entropy_backward_kernel<<<grid_for_rows(N), cuda::kBlockThreads, 0, stream_>>>(
      dlogits, dlogits_bf16, logits, targets, N, V, Vp, dloss, by_quads);
  check_launch("cross_entropy_backward");
}

}  // namespace folio
