// Reference nonlinearities: ReLU, GELU with the exact erf form (torch.nn.GELU() default), and
// GELU in its tanh form, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (GPT-2's gelu_new,
// torch.nn.GELU(approximate='tanh')).
#pragma once

#include <cmath>
#include <cstddef>

#include "backend/backend.h"

namespace folio::reference {

// The tanh form's inner polynomial u(x) = sqrt(2/pi) (x + 0.044715 x^3), and its constants.
constexpr double kGeluTanhScale = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluTanhCubic = 0.044715;

template <typename T>
T activation_value(T x, Activation kind) {
  switch (kind) {
    case Activation::kRelu:
      return x > 0 ? x : T(0);
    case Activation::kGelu:
      return T(0.5) * x * (T(1) + std::erf(x * T(M_SQRT1_2)));
    case Activation::kGeluTanh: {
      const T u = T(kGeluTanhScale) * (x + T(kGeluTanhCubic) * x * x * x);
      return T(0.5) * x * (T(1) + std::tanh(u));
    }
  }
  return T(0);
}

template <typename T>
T activation_derivative(T x, Activation kind) {
  switch (kind) {
    case Activation::kRelu:
      return x > 0 ? T(1) : T(0);
    case Activation::kGelu: {
      const T cdf = T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
      const T pdf = std::exp(T(-0.5) * x * x) * T(0.5 * M_2_SQRTPI * M_SQRT1_2);
      return cdf + x * pdf;
    }
    case Activation::kGeluTanh: {
      // d/dx [0.5 x (1 + tanh u)] = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'(x)
      const T u = T(kGeluTanhScale) * (x + T(kGeluTanhCubic) * x * x * x);
      const T du = T(kGeluTanhScale) * (T(1) + T(3 * kGeluTanhCubic) * x * x);
      const T t = std::tanh(u);
      return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du;
    }
  }
  return T(0);
}

template <typename T>
void activation_forward(T* out, const T* inp, size_t n, Activation kind) {
  for (size_t i = 0; i < n; ++i) out[i] = activation_value(inp[i], kind);
}

template <typename T>
void activation_backward(T* dinp, const T* dout, const T* inp, size_t n, Activation kind) {
  for (size_t i = 0; i < n; ++i) dinp[i] = dout[i] * activation_derivative(inp[i], kind);
}

}  // namespace folio::reference
