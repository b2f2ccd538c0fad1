// Cross-entropy on the GPU (reference: backend/reference/cross_entropy.h): one warp per row of
// logits, Vp wide, the softmax over the first V (the rest is vocabulary padding, gradient 0).
// Neither direction stores the probabilities: the backward pass recomputes each row's maximum and
// sum, which costs one read of the logits instead of a write and a read of (N, V).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace folio {

namespace {

using cuda::kWarpSize;

struct RowSoftmax {
  float max, sum;  // sum of exp(z - max)
};

__device__ RowSoftmax row_softmax(const float* z, int V, int lane) {
  float row_max = -INFINITY;
  for (int v = lane; v < V; v += kWarpSize) row_max = fmaxf(row_max, z[v]);
  row_max = cuda::warp_max(row_max);
  float total = 0.0f;
  for (int v = lane; v < V; v += kWarpSize) total += expf(z[v] - row_max);
  return {row_max, cuda::warp_sum(total)};
}

// losses[i] = log(sum exp(z)) - z[target]
__global__ void cross_entropy_forward_kernel(float* losses, const float* logits,
                                             const int32_t* targets, int N, int V, int Vp) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const float* z = logits + size_t(row) * Vp;
  const RowSoftmax s = row_softmax(z, V, lane);
  if (lane == 0) losses[row] = logf(s.sum) + s.max - z[targets[row]];
}

// dlogits = (softmax(z) - onehot(target)) * dloss
__global__ void cross_entropy_backward_kernel(float* dlogits, cuda::bf16* dlogits_bf16,
                                              const float* logits, const int32_t* targets, int N,
                                              int V, int Vp, float dloss) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const size_t offset = size_t(row) * Vp;
  const RowSoftmax s = row_softmax(logits + offset, V, lane);
  const int target = targets[row];
  for (int v = lane; v < Vp; v += kWarpSize) {
    const float g =
        v < V ? (expf(logits[offset + v] - s.max) / s.sum - (v == target ? 1.0f : 0.0f)) * dloss
              : 0.0f;
    dlogits[offset + v] = g;
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
  cross_entropy_forward_kernel<<<grid_for_rows(N), cuda::kBlockThreads, 0, stream_>>>(
      losses, logits, targets, N, V, Vp);
  check_launch("cross_entropy_forward");
}

void CudaBackend::cross_entropy_backward(float* dlogits, const float* logits,
                                         const int32_t* targets, int N, int V, int Vp,
                                         float dloss) {
  if (N == 0) return;
  cuda::bf16* dlogits_bf16 = bf16_output(dlogits, size_t(N) * Vp);
  cross_entropy_backward_kernel<<<grid_for_rows(N), cuda::kBlockThreads, 0, stream_>>>(
      dlogits, dlogits_bf16, logits, targets, N, V, Vp, dloss);
  check_launch("cross_entropy_backward");
}

}  // namespace folio
