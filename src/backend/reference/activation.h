// Reference nonlinearities: ReLU, and GELU with the exact erf form (torch.nn.GELU() default).
#pragma once

#include <cmath>
#include <cstddef>

#include "backend/backend.h"

namespace folio::reference {

template <typename T>
void activation_forward(T* out, const T* inp, size_t n, Activation kind) {
  for (size_t i = 0; i < n; ++i) {
    const T x = inp[i];
    out[i] = kind == Activation::kRelu ? (x > 0 ? x : T(0))
                                       : T(0.5) * x * (T(1) + std::erf(x * T(M_SQRT1_2)));
  }
}

template <typename T>
void activation_backward(T* dinp, const T* dout, const T* inp, size_t n, Activation kind) {
  for (size_t i = 0; i < n; ++i) {
    const T x = inp[i];
    T derivative;
    if (kind == Activation::kRelu) {
      derivative = x > 0 ? T(1) : T(0);
    } else {
      const T cdf = T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
      const T pdf = std::exp(T(-0.5) * x * x) * T(0.5 * M_2_SQRTPI * M_SQRT1_2);
      derivative = cdf + x * pdf;
    }
    dinp[i] = dout[i] * derivative;
  }
}

}  // namespace folio::reference
