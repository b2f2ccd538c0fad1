// The feed-forward nonlinearity on the GPU (reference: backend/reference/activation.h): ReLU, or
// GELU with the exact erf, as torch.nn.GELU(). Element-wise; the output (or input gradient) is
// written in bf16 too when a matrix product reads it that way. Nothing is saved: the backward
// pass reads the input the model keeps.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace folio {

namespace {

constexpr float kInverseSqrt2 = 0.70710678118654752f;

__device__ __forceinline__ float gelu_cdf(float x) {
  return 0.5f * (1.0f + erff(x * kInverseSqrt2));
}

__global__ void activation_forward_kernel(float* out, cuda::bf16* out_bf16, const float* inp,
                                          size_t n, Activation kind) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const float x = inp[i];
    const float y = kind == Activation::kRelu ? fmaxf(x, 0.0f) : x * gelu_cdf(x);
    out[i] = y;
    if (out_bf16) out_bf16[i] = __float2bfloat16(y);
  }
}

// dinp = dout * f'(x): 1 for x > 0 (ReLU); Phi(x) + x phi(x) (GELU)
__global__ void activation_backward_kernel(float* dinp, cuda::bf16* dinp_bf16, const float* dout,
                                           const float* inp, size_t n, Activation kind) {
  constexpr float kInverseSqrt2Pi = 0.3989422804014327f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const float x = inp[i];
    const float derivative = kind == Activation::kRelu
                                 ? (x > 0.0f ? 1.0f : 0.0f)
                                 : gelu_cdf(x) + x * expf(-0.5f * x * x) * kInverseSqrt2Pi;
    const float g = dout[i] * derivative;
    dinp[i] = g;
    if (dinp_bf16) dinp_bf16[i] = __float2bfloat16(g);
  }
}

unsigned grid_for(size_t n, int sm_count) {
  return std::min(cuda::blocks_for(n, cuda::kBlockThreads), 16u * sm_count);
}

}  // namespace

void CudaBackend::activation_forward(float* out, const float* inp, size_t n, Activation kind) {
  if (n == 0) return;
  cuda::bf16* out_bf16 = bf16_output(out, n);
  activation_forward_kernel<<<grid_for(n, sm_count_), cuda::kBlockThreads, 0, stream_>>>(
      out, out_bf16, inp, n, kind);
  check_launch("activation_forward");
}

void CudaBackend::activation_backward(float* dinp, const float* dout, const float* inp, size_t n,
                                      Activation kind) {
  if (n == 0) return;
  cuda::bf16* dinp_bf16 = bf16_output(dinp, n);
  activation_backward_kernel<<<grid_for(n, sm_count_), cuda::kBlockThreads, 0, stream_>>>(
      dinp, dinp_bf16, dout, inp, n, kind);
  check_launch("activation_backward");
}

}  // namespace folio
