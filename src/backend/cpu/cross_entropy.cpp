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
                                        int N, int V, int Vp, float dloss,
                                        ReadBy /*dlogits_read_by*/) {
  // The lm_head's gradient products read dlogits next: its bf16 copy is made here, while each
  // row is still in cache (a gpt2 row is 200 KiB, the whole tensor 206 MB at B*T = 1024). The
  // fp32 row is written whatever reads it: it is this loop's scratch, and in cache.
  cpu::bf16* dlogits16 = bf16_output(kGradient, dlogits, static_cast<size_t>(N) * Vp);
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
    if (dlogits16) {
      cpu::bf16* dz16 = dlogits16 + static_cast<size_t>(i) * Vp;
#pragma omp simd
      for (int v = 0; v < Vp; ++v) dz16[v] = cpu::to_bf16(dz[v]);
    }
  }
}

}  // namespace folio
