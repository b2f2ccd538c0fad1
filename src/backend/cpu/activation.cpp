// ReLU, exact GELU and tanh GELU on the CPU (reference: backend/reference/activation.h), alone
// and fused with the bias add of the linear layer before them.
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/vector_math.h"

namespace folio {

namespace {

// The nonlinearity and its derivative, one template per kind so that each loop vectorises
// without a branch on the kind inside it.
// The tanh GELU as x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): the same function as
// 0.5 x (1 + tanh u), since 0.5 (1 + tanh u) = sigmoid(2u), but with vexp in place of a tanh the
// loop would call, and no cancellation in 1 + tanh u for negative x.
constexpr float kGeluTanhScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluTanhCubic = 0.044715f;

inline float sigmoid_of_twice_gelu_u(float x) {
  const float u = kGeluTanhScale * (x + kGeluTanhCubic * x * x * x);
  return 1.0f / (1.0f + cpu::vexp(-2.0f * u));  // vexp clamps: 1 / (1 + 1e38) for very negative x
}

template <Activation kKind>
inline float activate(float x) {
  if constexpr (kKind == Activation::kRelu) {
    return x > 0.0f ? x : 0.0f;
  } else if constexpr (kKind == Activation::kGelu) {
    return x * cpu::vnormal_cdf(x);
  } else {
    return x * sigmoid_of_twice_gelu_u(x);
  }
}

template <Activation kKind>
inline float activation_derivative(float x) {
  if constexpr (kKind == Activation::kRelu) {
    return x > 0.0f ? 1.0f : 0.0f;
  } else if constexpr (kKind == Activation::kGeluTanh) {
    // d/dx [x s(2u)] = s(2u) + x * 2 s(2u) (1 - s(2u)) u'(x), s the sigmoid
    const float s = sigmoid_of_twice_gelu_u(x);
    const float du = kGeluTanhScale * (1.0f + 3.0f * kGeluTanhCubic * x * x);
    return s + 2.0f * x * s * (1.0f - s) * du;
  } else {
    // d/dx [x Phi(x)] = Phi(x) + x phi(x), phi(x) = e^(-x^2 / 2) / sqrt(2 pi)
    const float inv_sqrt_2pi = static_cast<float>(0.5 * M_2_SQRTPI * M_SQRT1_2);
    float gaussian;
    const float cdf = cpu::vnormal_cdf(x, gaussian);
    return cdf + x * gaussian * inv_sqrt_2pi;
  }
}

// out16 (and dinp16 below), unless null, gets the results rounded to bf16 in the same pass, for
// the product that reads them next (bf16_output); out null: that copy alone (ReadBy).
template <Activation kKind>
void activate_all(float* out, cpu::bf16* out16, const float* inp, size_t n) {
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(n);
  if (out == nullptr) {
#pragma omp parallel for simd schedule(static)
    for (std::ptrdiff_t i = 0; i < count; ++i) out16[i] = cpu::to_bf16(activate<kKind>(inp[i]));
    return;
  }
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
  if (dinp == nullptr) {
#pragma omp parallel for simd schedule(static)
    for (std::ptrdiff_t i = 0; i < count; ++i)
      dinp16[i] = cpu::to_bf16(dout[i] * activation_derivative<kKind>(inp[i]));
    return;
  }
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

// ReLU's derivative read from its output kept as bf16 (ProductOperand::kReluOutput): 1 where the
// value is above zero, its bits 0x0001 to 0x7F80 (positive up to +inf; NaN is not above zero), as
// the fp32 output's would say (rounding keeps the sign, and nothing the product writes is small
// enough to round to zero). dout times it, as activate_all_backward writes.
void relu_backward_from_bf16(float* dinp, cpu::bf16* dinp16, const float* dout,
                             const cpu::bf16* out16, size_t n) {
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < count; ++i) {
    const float d = dout[i] * (static_cast<uint16_t>(out16[i] - 1u) < 0x7F80u ? 1.0f : 0.0f);
    if (dinp) dinp[i] = d;
    if (dinp16) dinp16[i] = cpu::to_bf16(d);
  }
}

// pre[i, :] += bias, out[i, :] = activation(pre[i, :]): one pass over the rows. out null: only
// out16 gets them (ReadBy::kNextProduct).
template <Activation kKind>
void add_bias_and_activate(float* pre, float* out, cpu::bf16* out16, const float* bias, int N,
                           int OC) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    float* z = pre + static_cast<size_t>(i) * OC;
    if (out == nullptr) {
      cpu::bf16* y16 = out16 + static_cast<size_t>(i) * OC;
      if (bias) {
#pragma omp simd
        for (int o = 0; o < OC; ++o) z[o] += bias[o];
      }
#pragma omp simd
      for (int o = 0; o < OC; ++o) y16[o] = cpu::to_bf16(activate<kKind>(z[o]));
      continue;
    }
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

void CpuBackend::activation_forward(float* out, const float* inp, size_t n, Activation kind,
                                    ReadBy read_by) {
  cpu::bf16* out16 = bf16_output(kOperandA, out, n, read_by);  // out null: the copy alone
  switch (kind) {
    case Activation::kRelu:
      return activate_all<Activation::kRelu>(out, out16, inp, n);
    case Activation::kGelu:
      return activate_all<Activation::kGelu>(out, out16, inp, n);
    case Activation::kGeluTanh:
      return activate_all<Activation::kGeluTanh>(out, out16, inp, n);
  }
}

void CpuBackend::activation_backward(float* dinp, const float* dout, const float* inp, size_t n,
                                     Activation kind, ReadBy dinp_read_by) {
  cpu::bf16* dinp16 = bf16_output(kGradient, dinp, n, dinp_read_by);  // dinp null: the copy alone
  if (const cpu::bf16* kept = kept_in_bf16(inp, n)) {
    if (kind != Activation::kRelu)
      throw Error("internal: only ReLU's backward reads its input's bf16 values alone");
    return relu_backward_from_bf16(dinp, dinp16, dout, kept, n);
  }
  switch (kind) {
    case Activation::kRelu:
      return activate_all_backward<Activation::kRelu>(dinp, dinp16, dout, inp, n);
    case Activation::kGelu:
      return activate_all_backward<Activation::kGelu>(dinp, dinp16, dout, inp, n);
    case Activation::kGeluTanh:
      return activate_all_backward<Activation::kGeluTanh>(dinp, dinp16, dout, inp, n);
  }
}

// The product, then the nonlinearity in one pass over its output. In fp32 that pass adds the
// bias too (sgemm has no bias: matmul_forward would fill the output with it before the product
// and have the product read it back, beta = 1); bf16 products add it as they write the rows, and
// apply ReLU too when only its output is kept (pre == out): then there is no pass at all, and the
// product that reads the output next rounds it to bf16. With bf16 products, an output only the
// next product reads (GELU's, where the backward pass recomputes it) is written as that
// product's bf16 operand alone: `baby`'s GELU passes wrote 4 + 2 bytes an element for the 2 read.
void CpuBackend::matmul_activation_forward(float* pre, float* out, const float* inp,
                                           const float* weight, const float* bias, int N, int IC,
                                           int OC, Activation kind, ReadBy out_read_by) {
  if (bf16_ && kind == Activation::kRelu && pre == out)
    return linear_bf16(out, inp, weight, bias, N, IC, OC, /*relu=*/true);
  // fc itself is read by GELU's backward, at full precision; GELU's output, read by fc2's
  // products alone, may be kept as bf16 (bf16_output writes it there).
  if (kept_in_bf16(pre, static_cast<size_t>(N) * OC))
    throw Error("internal: fc is kept as bf16 only as a ReLU model's in-place output");
  // With bf16 products the bias is added by the product itself (matmul_forward); in fp32 by the
  // pass that applies the nonlinearity.
  matmul_forward(pre, inp, weight, bf16_ ? bias : nullptr, N, IC, OC);
  if (bf16_) bias = nullptr;
  cpu::bf16* out16 = bf16_output(kOperandA, out, static_cast<size_t>(N) * OC, out_read_by);
  switch (kind) {
    case Activation::kRelu:
      return add_bias_and_activate<Activation::kRelu>(pre, out, out16, bias, N, OC);
    case Activation::kGelu:
      return add_bias_and_activate<Activation::kGelu>(pre, out, out16, bias, N, OC);
    case Activation::kGeluTanh:
      return add_bias_and_activate<Activation::kGeluTanh>(pre, out, out16, bias, N, OC);
  }
}

}  // namespace folio
