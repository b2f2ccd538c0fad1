// Reference AdamW and the reductions around it, written as torch.optim.AdamW (single-tensor
// path) and torch.nn.utils.clip_grad_norm_ compute them.
#pragma once

#include <cmath>
#include <cstddef>

#include "backend/backend.h"

namespace folio::reference {

// The update reads the gradients clipped (AdamWStep::clip_squared_norm, here host memory): the
// numbers of clip_grad_norm_ followed by torch.optim.AdamW.
template <typename T>
void adamw_update(T* params, const T* grads, T* m, T* v, size_t n, const AdamWStep& s) {
  const T clip = s.clip_squared_norm ? T(s.clip_coefficient(*s.clip_squared_norm)) : T(1);
  const double bias_correction1 = 1.0 - std::pow(s.beta1, double(s.step));
  const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(s.beta2, double(s.step)));
  const double step_size = s.learning_rate / bias_correction1;
  for (size_t i = 0; i < n; ++i) {
    params[i] *= T(1.0 - s.learning_rate * s.weight_decay);
    const T g = grads[i] * clip;
    m[i] = m[i] * T(s.beta1) + g * T(1.0 - s.beta1);
    v[i] = v[i] * T(s.beta2) + g * g * T(1.0 - s.beta2);
    const T denom = std::sqrt(v[i]) / T(bias_correction2_sqrt) + T(s.eps);
    params[i] -= T(step_size) * m[i] / denom;
  }
}

template <typename T>
T sum(const T* x, size_t n) {
  T total = 0;
  for (size_t i = 0; i < n; ++i) total += x[i];
  return total;
}

template <typename T>
T sum_of_squares(const T* x, size_t n) {
  T total = 0;
  for (size_t i = 0; i < n; ++i) total += x[i] * x[i];
  return total;
}

}  // namespace folio::reference
