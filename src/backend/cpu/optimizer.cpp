// AdamW (clipping folded in) and reductions on the CPU (reference: backend/reference/optimizer.h).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/ordered_sum.h"
#include "backend/cpu/vector_math.h"

namespace folio {

namespace {

// One AdamW update of n parameters; with kMirror also their bf16 copy, in the same pass.
template <bool kMirror>
void adamw_loop(float* params, cpu::bf16* mirror, const float* grads, float* m, float* v, size_t n,
                const AdamWStep& s) {
  // Clipping as the gradients are read (the coefficient is 1 when off, and g * 1 is g).
  const float clip = s.clip_squared_norm ? s.clip_coefficient(*s.clip_squared_norm) : 1.0f;
  const double bias_correction1 = 1.0 - std::pow(s.beta1, double(s.step));
  const float bias_correction2_sqrt =
      static_cast<float>(std::sqrt(1.0 - std::pow(s.beta2, double(s.step))));
  const float step_size = static_cast<float>(s.learning_rate / bias_correction1);
  const float decay = static_cast<float>(1.0 - s.learning_rate * s.weight_decay);
  const float beta1 = static_cast<float>(s.beta1), beta2 = static_cast<float>(s.beta2);
  const float one_minus_beta1 = static_cast<float>(1.0 - s.beta1);
  const float one_minus_beta2 = static_cast<float>(1.0 - s.beta2);
  const float eps = static_cast<float>(s.eps);
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < count; ++i) {
    const float g = grads[i] * clip;
    const float m_i = m[i] * beta1 + g * one_minus_beta1;
    const float v_i = v[i] * beta2 + g * g * one_minus_beta2;
    m[i] = m_i;
    v[i] = v_i;
    const float p =
        params[i] * decay - step_size * m_i / (std::sqrt(v_i) / bias_correction2_sqrt + eps);
    params[i] = p;
    if constexpr (kMirror) mirror[i] = cpu::to_bf16(p);
  }
}

}  // namespace

void CpuBackend::adamw_update(float* params, const float* grads, float* m, float* v, size_t n,
                              const AdamWStep& step) {
  // An up-to-date bf16 mirror stays so; one out of date is refreshed whole at the next product.
  const bool mirrored =
      !mirror_.stale && params >= mirror_.source && params + n <= mirror_.source + mirror_.count;
  if (mirrored) {
    adamw_loop<true>(params, mirror_.values.data() + (params - mirror_.source), grads, m, v, n,
                     step);
  } else {
    wrote(params, n * sizeof(float));
    adamw_loop<false>(params, nullptr, grads, m, v, n, step);
  }
}

void CpuBackend::sum(float* result, const float* x, size_t n) {
  *result = static_cast<float>(
      cpu::ordered_sum(x, n, sum_partials_, [](float v) { return double(v); }));
}

void CpuBackend::sum_of_squares(float* result, const float* x, size_t n) {
  *result = static_cast<float>(
      cpu::ordered_sum(x, n, sum_partials_, [](float v) { return double(v) * double(v); }));
}

void CpuBackend::scale(float* x, size_t n, float factor) {
  wrote(x, n * sizeof(float));
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < count; ++i) x[i] *= factor;
}

}  // namespace folio
