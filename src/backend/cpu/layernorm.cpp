// LayerNorm on the CPU (reference: backend/reference/layernorm.h). Rows are independent; the
// parameter gradients are summed over rows in per-thread partials, then added in thread order so
// the result does not depend on scheduling.
#include <omp.h>

#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/reference/layernorm.h"

namespace folio {

void CpuBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                   const float* weight, const float* bias, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const float* x = inp + static_cast<size_t>(i) * C;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < C; ++c) sum += x[c];
    const float m = sum / C;
    float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
    for (int c = 0; c < C; ++c) squares += (x[c] - m) * (x[c] - m);
    const float s = 1.0f / std::sqrt(squares / C + static_cast<float>(reference::kLayerNormEps));
    float* y = out + static_cast<size_t>(i) * C;
    if (bias) {
#pragma omp simd
      for (int c = 0; c < C; ++c) y[c] = (x[c] - m) * s * weight[c] + bias[c];
    } else {
#pragma omp simd
      for (int c = 0; c < C; ++c) y[c] = (x[c] - m) * s * weight[c];
    }
    mean[i] = m;
    rstd[i] = s;
  }
}

void CpuBackend::layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                    const float* inp, const float* weight, const float* mean,
                                    const float* rstd, int N, int C) {
  // Per-thread partial sums of dweight and dbias, side by side.
  float* partials = thread_partials(size_t(2) * C);
#pragma omp parallel num_threads(threads_)
  {
    float* my_dweight = partials + size_t(2) * C * omp_get_thread_num();
    float* my_dbias = my_dweight + C;
#pragma omp for schedule(static)
    for (int i = 0; i < N; ++i) {
      const float* x = inp + static_cast<size_t>(i) * C;
      const float* dy = dout + static_cast<size_t>(i) * C;
      const float m = mean[i], s = rstd[i];
      float g_sum = 0.0f, gn_sum = 0.0f;
#pragma omp simd reduction(+ : g_sum, gn_sum)
      for (int c = 0; c < C; ++c) {
        const float g = dy[c] * weight[c];
        g_sum += g;
        gn_sum += g * (x[c] - m) * s;
      }
      const float g_mean = g_sum / C, gn_mean = gn_sum / C;
      float* dx = dinp + static_cast<size_t>(i) * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) {
        const float n = (x[c] - m) * s;
        dx[c] += s * (dy[c] * weight[c] - g_mean - n * gn_mean);
        my_dweight[c] += dy[c] * n;
        my_dbias[c] += dy[c];
      }
    }
  }
  for (int t = 0; t < threads_; ++t) {
    const float* part = partials + size_t(2) * C * t;
    for (int c = 0; c < C; ++c) {
      dweight[c] += part[c];
      if (dbias) dbias[c] += part[C + c];
    }
  }
}

}  // namespace folio
