// The feed-forward nonlinearity on the GPU (reference: backend/reference/activation.h): ReLU,
// GELU with the exact erf, as torch.nn.GELU(), or GELU in its tanh form (GPT-2's gelu_new).
// Element-wise; the output (or input gradient) is written in bf16 too when a matrix product reads
// it that way. Nothing is saved: the backward pass reads the input the model keeps, which for
// ReLU may be its output kept as bf16 alone (FOLIO_CUDA_RELU_OUTPUT=bf16; its signs are all the
// backward needs, and rounding keeps them).
#include <initializer_list>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace folio {

namespace {

constexpr float kInverseSqrt2 = 0.70710678118654752f;

__device__ __forceinline__ float gelu_cdf(float x) {
  return 0.5f * (1.0f + erff(x * kInverseSqrt2));
}

// The tanh form: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
constexpr float kGeluTanhScale = 0.7978845608028654f;
constexpr float kGeluTanhCubic = 0.044715f;

__device__ __forceinline__ float gelu_tanh_inner(float x) {
  return kGeluTanhScale * (x + kGeluTanhCubic * x * x * x);
}

__device__ __forceinline__ float activate(float x, Activation kind) {
  switch (kind) {
    case Activation::kRelu:
      return fmaxf(x, 0.0f);
    case Activation::kGelu:
      return x * gelu_cdf(x);
    default:
      return 0.5f * x * (1.0f + tanhf(gelu_tanh_inner(x)));
  }
}

// 1 for x > 0 (ReLU); Phi(x) + x phi(x) (GELU); 0.5 (1 + t) + 0.5 x (1 - t^2) u'(x) with
// t = tanh(u) (tanh GELU)
__device__ __forceinline__ float activation_derivative(float x, Activation kind) {
  constexpr float kInverseSqrt2Pi = 0.3989422804014327f;
  switch (kind) {
    case Activation::kRelu:
      return x > 0.0f ? 1.0f : 0.0f;
    case Activation::kGelu:
      return gelu_cdf(x) + x * expf(-0.5f * x * x) * kInverseSqrt2Pi;
    default: {
      const float t = tanhf(gelu_tanh_inner(x));
      const float du = kGeluTanhScale * (1.0f + 3.0f * kGeluTanhCubic * x * x);
      return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
    }
  }
}

__global__ void activation_forward_kernel(float* out, cuda::bf16* out_bf16, const float* inp,
                                          size_t n, Activation kind) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const float x = inp[i];
    const float y = activate(x, kind);
    out[i] = y;
    if (out_bf16) out_bf16[i] = __float2bfloat16(y);
  }
}

// dinp = dout * f'(x), x fp32 or bf16; dinp null: its bf16 copy alone
template <typename Input>
__global__ void activation_backward_kernel(float* dinp, cuda::bf16* dinp_bf16, const float* dout,
                                           const Input* inp, size_t n, Activation kind) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const float g = dout[i] * activation_derivative(cuda::as_float(inp[i]), kind);
    if (dinp) dinp[i] = g;
    if (dinp_bf16) dinp_bf16[i] = __float2bfloat16(g);
  }
}

// The same, four elements a step: one 16-byte load per array where the loops above make one of 4
// bytes, so that a thread has four times the bytes in flight while it waits on memory (these
// kernels only move data). For n a multiple of 4 and 16-byte aligned arrays (vectorizable()).
__device__ __forceinline__ void store_bf16_quad(cuda::bf16* out, float4 v) {
  auto* pair = reinterpret_cast<__nv_bfloat162*>(out);
  pair[0] = __floats2bfloat162_rn(v.x, v.y);
  pair[1] = __floats2bfloat162_rn(v.z, v.w);
}

__global__ void activation_forward_quads_kernel(float4* out, cuda::bf16* out_bf16,
                                                const float4* inp, size_t quads,
                                                Activation kind) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < quads;
       i += size_t(gridDim.x) * blockDim.x) {
    const float4 x = inp[i];
    const float4 y = make_float4(activate(x.x, kind), activate(x.y, kind), activate(x.z, kind),
                                 activate(x.w, kind));
    out[i] = y;
    if (out_bf16) store_bf16_quad(out_bf16 + 4 * i, y);
  }
}

// Quad i of an fp32 array, or of a bf16 one (8 bytes, two pairs).
__device__ __forceinline__ float4 load_quad(const float* x, size_t i) {
  return reinterpret_cast<const float4*>(x)[i];
}
__device__ __forceinline__ float4 load_quad(const cuda::bf16* x, size_t i) {
  const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(x) + 2 * i;
  const float2 low = __bfloat1622float2(pairs[0]), high = __bfloat1622float2(pairs[1]);
  return make_float4(low.x, low.y, high.x, high.y);
}

// ReLU in place on a tensor kept as bf16 (the product alone wrote it: a profiled step's split
// path)
__global__ void relu_in_place_bf16_kernel(cuda::bf16* x, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    x[i] = __float2bfloat16(fmaxf(__bfloat162float(x[i]), 0.0f));
}

template <typename Input>
__global__ void activation_backward_quads_kernel(float4* dinp, cuda::bf16* dinp_bf16,
                                                 const float4* dout, const Input* inp, size_t quads,
                                                 Activation kind) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < quads;
       i += size_t(gridDim.x) * blockDim.x) {
    const float4 d = dout[i], x = load_quad(inp, i);
    const float4 g = make_float4(d.x * activation_derivative(x.x, kind),
                                 d.y * activation_derivative(x.y, kind),
                                 d.z * activation_derivative(x.z, kind),
                                 d.w * activation_derivative(x.w, kind));
    if (dinp) dinp[i] = g;
    if (dinp_bf16) store_bf16_quad(dinp_bf16 + 4 * i, g);
  }
}

bool vectorizable(size_t n, std::initializer_list<const void*> pointers) {
  return n % 4 == 0 && cuda::all_16_byte_aligned(pointers);
}

unsigned grid_for(size_t n, int sm_count) {
  return std::min(cuda::blocks_for(n, cuda::kBlockThreads), 16u * sm_count);
}

}  // namespace

void CudaBackend::activation_forward(float* out, const float* inp, size_t n, Activation kind,
                                     ReadBy /*read_by*/) {
  if (n == 0) return;
  if (cuda::bf16* kept = kept_in_bf16(out, n)) {
    if (kind != Activation::kRelu || inp != out)
      throw Error("internal: only ReLU in place runs on a tensor kept as bf16");
    wrote(kept, n * sizeof(cuda::bf16));
    relu_in_place_bf16_kernel<<<grid_for(n, sm_count_), cuda::kBlockThreads, 0, stream_>>>(kept, n);
    return check_launch("relu_in_place_bf16");
  }
  cuda::bf16* out_bf16 = bf16_output(out, n);
  if (vectorizable(n, {out, out_bf16, inp})) {
    activation_forward_quads_kernel<<<grid_for(n / 4, sm_count_), cuda::kBlockThreads, 0,
                                      stream_>>>(reinterpret_cast<float4*>(out), out_bf16,
                                                 reinterpret_cast<const float4*>(inp), n / 4,
                                                 kind);
  } else {
    activation_forward_kernel<<<grid_for(n, sm_count_), cuda::kBlockThreads, 0, stream_>>>(
        out, out_bf16, inp, n, kind);
  }
  check_launch("activation_forward");
}

void CudaBackend::activation_backward(float* dinp, const float* dout, const float* inp, size_t n,
                                      Activation kind, ReadBy dinp_read_by) {
  if (n == 0) return;
  // (dout resolved before dinp's copy is marked written: in place they are one tensor)
  dout = fp32_values(dout, n, Scratch::kProductOutput);
  // d_fc, which fc's backward products alone read: its bf16 copy alone where one is kept (dinp
  // becomes null), 2 bytes an element written where the fp32 values and the copy took 6
  cuda::bf16* dinp_bf16 = bf16_output(dinp, n, dinp_read_by);
  // the input as the model keeps it: fp32, or bf16 alone (ReLU's output kept as bf16)
  const auto launch = [&](const auto* x) {
    if (vectorizable(n, {dinp, dinp_bf16, dout, x})) {
      activation_backward_quads_kernel<<<grid_for(n / 4, sm_count_), cuda::kBlockThreads, 0,
                                         stream_>>>(reinterpret_cast<float4*>(dinp), dinp_bf16,
                                                    reinterpret_cast<const float4*>(dout), x, n / 4,
                                                    kind);
    } else {
      activation_backward_kernel<<<grid_for(n, sm_count_), cuda::kBlockThreads, 0, stream_>>>(
          dinp, dinp_bf16, dout, x, n, kind);
    }
  };
  if (const cuda::bf16* alone = bf16_alone(inp, n)) {
    launch(alone);
  } else {
    launch(inp);
  }
  check_launch("activation_backward");
}

}  // namespace folio
