// ReLU and exact GELU on the CPU (reference: backend/reference/activation.h).
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/vector_math.h"

namespace folio {

void CpuBackend::activation_forward(float* out, const float* inp, size_t n, Activation kind) {
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(n);
  if (kind == Activation::kRelu) {
#pragma omp parallel for simd schedule(static)
    for (std::ptrdiff_t i = 0; i < count; ++i) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
  } else {
#pragma omp parallel for simd schedule(static)
    for (std::ptrdiff_t i = 0; i < count; ++i)
      out[i] = 0.5f * inp[i] * (1.0f + cpu::verf(inp[i] * static_cast<float>(M_SQRT1_2)));
  }
}

void CpuBackend::activation_backward(float* dinp, const float* dout, const float* inp, size_t n,
                                     Activation kind) {
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(n);
  if (kind == Activation::kRelu) {
#pragma omp parallel for simd schedule(static)
    for (std::ptrdiff_t i = 0; i < count; ++i) dinp[i] = inp[i] > 0.0f ? dout[i] : 0.0f;
  } else {
    // d/dx [x Phi(x)] = Phi(x) + x phi(x)
    const float inv_sqrt_2pi = static_cast<float>(0.5 * M_2_SQRTPI * M_SQRT1_2);
#pragma omp parallel for simd schedule(static)
    for (std::ptrdiff_t i = 0; i < count; ++i) {
      const float x = inp[i];
      const float cdf = 0.5f * (1.0f + cpu::verf(x * static_cast<float>(M_SQRT1_2)));
      const float pdf = cpu::vexp(-0.5f * x * x) * inv_sqrt_2pi;
      dinp[i] = dout[i] * (cdf + x * pdf);
    }
  }
}

}  // namespace folio
