// Token + position embedding on the CPU (reference: backend/reference/embedding.h).
#include <omp.h>

#include "backend/cpu/cpu_backend.h"

namespace folio {

void CpuBackend::embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                   const float* wpe, int B, int T, int C, int first_position) {
#pragma omp parallel for schedule(static)
  for (int row = 0; row < B * T; ++row) {
    const int t = row % T;
    const float* token_row = wte + static_cast<size_t>(tokens[row]) * C;
    const float* position_row = wpe + static_cast<size_t>(first_position + t) * C;
    float* out_row = out + static_cast<size_t>(row) * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) out_row[c] = token_row[c] + position_row[c];
  }
}

void CpuBackend::embedding_backward(float* dwte, float* dwpe, const float* dout,
                                    const int32_t* tokens, int B, int T, int C) {
  // Rows with the same token add into the same dwte row, so threads split the channels instead
  // of the rows: no two threads ever touch the same element.
#pragma omp parallel
  {
    const int thread = omp_get_thread_num(), count = omp_get_num_threads();
    const int c_begin = C * thread / count, c_end = C * (thread + 1) / count;
    for (int row = 0; row < B * T; ++row) {
      const float* dout_row = dout + static_cast<size_t>(row) * C;
      float* token_row = dwte + static_cast<size_t>(tokens[row]) * C;
      float* position_row = dwpe + static_cast<size_t>(row % T) * C;
#pragma omp simd
      for (int c = c_begin; c < c_end; ++c) {
        token_row[c] += dout_row[c];
        position_row[c] += dout_row[c];
      }
    }
  }
}

}  // namespace folio
