// ReLU and exact GELU on the CPU (reference: backend/reference/activation.h), alone and fused
// with the bias add of the linear layer before them.
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/vector_math.h"

namespace folio {

namespace {

// The nonlinearity and its derivative, one template per kind so that each loop vectorises
// without a branch on the kind inside it.
template <Activation kKind>
inline float activate(float x) {
  if constexpr (kKind == Activation::kRelu) {
    return x > 0.0f ? x : 0.0f;
  } else {
    return 0.5f * x * (1.0f + cpu::verf(x * static_cast<float>(M_SQRT1_2)));
  }
}

template <Activation kKind>
inline float activation_derivative(float x) {
  if constexpr (kKind == Activation::kRelu) {
    return x > 0.0f ? 1.0f : 0.0f;
  } else {
    // d/dx [x Phi(x)] = Phi(x) + x phi(x)
    const float inv_sqrt_2pi = static_cast<float>(0.5 * M_2_SQRTPI * M_SQRT1_2);
    const float cdf = 0.5f * (1.0f + cpu::verf(x * static_cast<float>(M_SQRT1_2)));
    const float pdf = cpu::vexp(-0.5f * x * x) * inv_sqrt_2pi;
    return cdf + x * pdf;
  }
}

// out16 (and dinp16 below), unless null, gets the results rounded to bf16 in the same pass, for
// the product that reads them next (bf16_output).
template <Activation kKind>
void activate_all(float* out, cpu::bf16* out16, const float* inp, size_t n) {
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(n);
  if (out16) {
#pragma omp parallel for simd schedule(static)
    for (std::ptrdiff_t i = 0; i < count; ++i) {
      out[i] = activate<kKind>(inp[i]);
      out16[i] = cpu::to_bf16(out[i]);
    }
    return;
  }
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < count; ++i) out[i] = activate<kKind>(inp[i]);
}

template <Activation kKind>
void activate_all_backward(float* dinp, cpu::bf16* dinp16, const float* dout, const float* inp,
                           size_t n) {
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(n);
  if (dinp16) {
#pragma omp parallel for simd schedule(static)
    for (std::ptrdiff_t i = 0; i < count; ++i) {
      dinp[i] = dout[i] * activation_derivative<kKind>(inp[i]);
      dinp16[i] = cpu::to_bf16(dinp[i]);
    }
    return;
  }
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < count; ++i)
    dinp[i] = dout[i] * activation_derivative<kKind>(inp[i]);
}

// pre[i, :] += bias, out[i, :] = activation(pre[i, :]): one pass over the rows.
template <Activation kKind>
void add_bias_and_activate(float* pre, float* out, cpu::bf16* out16, const float* bias, int N,
                           int OC) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    float* z = pre + static_cast<size_t>(i) * OC;
    float* y = out + static_cast<size_t>(i) * OC;
    if (bias) {
#pragma omp simd
      for (int o = 0; o < OC; ++o) {
        z[o] += bias[o];
        y[o] = activate<kKind>(z[o]);
      }
    } else {
#pragma omp simd
      for (int o = 0; o < OC; ++o) y[o] = activate<kKind>(z[o]);
    }
    if (out16) {
      cpu::bf16* y16 = out16 + static_cast<size_t>(i) * OC;
#pragma omp simd
      for (int o = 0; o < OC; ++o) y16[o] = cpu::to_bf16(y[o]);
    }
  }
}

}  // namespace

void CpuBackend::activation_forward(float* out, const float* inp, size_t n, Activation kind) {
  cpu::bf16* out16 = bf16_output(kOperandA, out, n);
  if (kind == Activation::kRelu) {
    activate_all<Activation::kRelu>(out, out16, inp, n);
  } else {
    activate_all<Activation::kGelu>(out, out16, inp, n);
  }
}

void CpuBackend::activation_backward(float* dinp, const float* dout, const float* inp, size_t n,
                                     Activation kind) {
  cpu::bf16* dinp16 = bf16_output(kGradient, dinp, n);
  if (kind == Activation::kRelu) {
    activate_all_backward<Activation::kRelu>(dinp, dinp16, dout, inp, n);
  } else {
    activate_all_backward<Activation::kGelu>(dinp, dinp16, dout, inp, n);
  }
}

// The product alone, then the bias and the nonlinearity in one pass: one pass over the (N, OC)
// output fewer than matmul_forward with a bias, which fills the output with the bias before the
// product and has the product read it back (beta = 1), and activation_forward after it.
void CpuBackend::matmul_activation_forward(float* pre, float* out, const float* inp,
                                           const float* weight, const float* bias, int N, int IC,
                                           int OC, Activation kind) {
  matmul_forward(pre, inp, weight, nullptr, N, IC, OC);
  cpu::bf16* out16 = bf16_output(kOperandA, out, static_cast<size_t>(N) * OC);
  if (kind == Activation::kRelu) {
    add_bias_and_activate<Activation::kRelu>(pre, out, out16, bias, N, OC);
  } else {
    add_bias_and_activate<Activation::kGelu>(pre, out, out16, bias, N, OC);
  }
}

}  // namespace folio
