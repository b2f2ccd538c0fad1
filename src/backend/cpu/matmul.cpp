// Linear layers on the CPU: three sgemm calls (reference: backend/reference/matmul.h).
#include <omp.h>

#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gemm.h"

namespace folio {

void CpuBackend::matmul_forward(float* out, const float* inp, const float* weight,
                                const float* bias, int N, int IC, int OC) {
  if (bias) {
    // Start from the bias in every row and let the product accumulate onto it (beta = 1).
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; ++i) std::copy_n(bias, OC, out + static_cast<size_t>(i) * OC);
  }
  cpu::sgemm(false, true, N, OC, IC, 1.0f, inp, IC, weight, IC, bias ? 1.0f : 0.0f, out, OC);
}

void CpuBackend::matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                 const float* inp, const float* weight, int N, int IC, int OC) {
  if (dinp) cpu::sgemm(false, false, N, IC, OC, 1.0f, dout, OC, weight, IC, 0.0f, dinp, IC);
  cpu::sgemm(true, false, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dweight, IC);
  if (dbias) {
    float* partials = thread_partials(static_cast<size_t>(OC));
#pragma omp parallel num_threads(threads_)
    {
      float* mine = partials + static_cast<size_t>(OC) * omp_get_thread_num();
#pragma omp for schedule(static)
      for (int i = 0; i < N; ++i) {
        const float* row = dout + static_cast<size_t>(i) * OC;
#pragma omp simd
        for (int o = 0; o < OC; ++o) mine[o] += row[o];
      }
    }
    reduce_thread_partials(dbias, static_cast<size_t>(OC));
  }
}

}  // namespace folio
