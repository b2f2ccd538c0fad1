// Cross-entropy on the CPU (reference: backend/reference/cross_entropy.h): rows of Vp logits, the
// softmax over the first V, the padding's gradient 0.
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/vector_math.h"

namespace folio {

void CpuBackend::cross_entropy_forward(float* losses, const float* logits, const int32_t* targets,
                                       int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const float* z = logits + static_cast<size_t>(i) * Vp;
    const float max_logit = cpu::row_max(z, V);
    float total = 0.0f;
#pragma omp simd reduction(+ : total)
    for (int v = 0; v < V; ++v) total += cpu::vexp(z[v] - max_logit);
    losses[i] = std::log(total) + max_logit - z[targets[i]];
  }
}

void CpuBackend::cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets,
                                        int N, int V, int Vp, float dloss) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const float* z = logits + static_cast<size_t>(i) * Vp;
    float* dz = dlogits + static_cast<size_t>(i) * Vp;
    const float max_logit = cpu::row_max(z, V);
    float total = 0.0f;
#pragma omp simd reduction(+ : total)
    for (int v = 0; v < V; ++v) {
      dz[v] = cpu::vexp(z[v] - max_logit);
      total += dz[v];
    }
    const float scale = dloss / total;
#pragma omp simd
    for (int v = 0; v < V; ++v) dz[v] *= scale;
    dz[targets[i]] -= dloss;
    std::fill(dz + V, dz + Vp, 0.0f);
  }
}

}  // namespace folio
