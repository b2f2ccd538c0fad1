// Reference cross-entropy: loss = logsumexp(logits) - logits[target], per row, over the first V
// of each row's Vp columns (the rest are vocabulary padding: read by nothing, their gradient 0).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace folio::reference {

template <typename T>
void cross_entropy_forward(T* losses, const T* logits, const int32_t* targets, int N, int V,
                           int Vp) {
  for (int i = 0; i < N; ++i) {
    const T* z = logits + static_cast<size_t>(i) * Vp;
    const T max_logit = *std::max_element(z, z + V);
    T total = 0;
    for (int v = 0; v < V; ++v) total += std::exp(z[v] - max_logit);
    losses[i] = std::log(total) + max_logit - z[targets[i]];
  }
}

template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const int32_t* targets, int N, int V,
                            int Vp, T dloss) {
  for (int i = 0; i < N; ++i) {
    const T* z = logits + static_cast<size_t>(i) * Vp;
    T* dz = dlogits + static_cast<size_t>(i) * Vp;
    const T max_logit = *std::max_element(z, z + V);
    T total = 0;
    for (int v = 0; v < V; ++v) total += std::exp(z[v] - max_logit);
    for (int v = 0; v < V; ++v)
      dz[v] = (std::exp(z[v] - max_logit) / total - (v == targets[i] ? T(1) : T(0))) * dloss;
    std::fill(dz + V, dz + Vp, T(0));
  }
}

}  // namespace folio::reference
