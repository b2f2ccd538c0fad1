// Reference LayerNorm (eps 1e-5, biased variance, as torch.nn.LayerNorm).
#pragma once

#include <cmath>
#include <cstddef>

namespace folio::reference {

inline constexpr double kLayerNormEps = 1e-5;

template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                       int N, int C) {
  for (int i = 0; i < N; ++i) {
    const T* x = inp + static_cast<size_t>(i) * C;
    T m = 0;
    for (int c = 0; c < C; ++c) m += x[c];
    m /= C;
    T variance = 0;
    for (int c = 0; c < C; ++c) variance += (x[c] - m) * (x[c] - m);
    variance /= C;
    const T s = T(1) / std::sqrt(variance + T(kLayerNormEps));
    T* y = out + static_cast<size_t>(i) * C;
    for (int c = 0; c < C; ++c) y[c] = (x[c] - m) * s * weight[c] + (bias ? bias[c] : T(0));
    mean[i] = m;
    rstd[i] = s;
  }
}

// With n = (x - mean) * rstd and g = dout * weight:
//   dx = rstd * (g - mean(g) - n * mean(g * n)),  dweight += sum dout * n,  dbias += sum dout
template <typename T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                        const T* weight, const T* mean, const T* rstd, int N, int C) {
  for (int i = 0; i < N; ++i) {
    const T* x = inp + static_cast<size_t>(i) * C;
    const T* dy = dout + static_cast<size_t>(i) * C;
    T g_mean = 0, gn_mean = 0;
    for (int c = 0; c < C; ++c) {
      const T n = (x[c] - mean[i]) * rstd[i];
      const T g = dy[c] * weight[c];
      g_mean += g;
      gn_mean += g * n;
    }
    g_mean /= C;
    gn_mean /= C;
    T* dx = dinp + static_cast<size_t>(i) * C;
    for (int c = 0; c < C; ++c) {
      const T n = (x[c] - mean[i]) * rstd[i];
      const T g = dy[c] * weight[c];
      dx[c] += rstd[i] * (g - g_mean - n * gn_mean);
      dweight[c] += dy[c] * n;
      if (dbias) dbias[c] += dy[c];
    }
  }
}

}  // namespace folio::reference
