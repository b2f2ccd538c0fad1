// Residual branch with dropout on the CPU (reference: backend/reference/dropout_add.h).
// Work is split into chunks of one sample each so that a chunk's mask is one run of its stream.
#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/vector_math.h"

namespace folio {

namespace {

constexpr size_t kChunk = 4096;

// Calls body(sample, first_element, count, offset) for every chunk of at most kChunk elements of
// each sample, in parallel. A chunk never spans two samples, so its dropout mask is one run of
// its sample's random stream.
template <typename Body>
void for_each_chunk(int B, size_t per_sample, Body body) {
  const size_t chunks_per_sample = (per_sample + kChunk - 1) / kChunk;
  const std::ptrdiff_t chunks = static_cast<std::ptrdiff_t>(chunks_per_sample * B);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t chunk = 0; chunk < chunks; ++chunk) {
    const int b = static_cast<int>(chunk / chunks_per_sample);
    const size_t first = (chunk % chunks_per_sample) * kChunk;
    const size_t n = std::min(kChunk, per_sample - first);
    body(b, first, n, static_cast<size_t>(b) * per_sample + first);
  }
}

}  // namespace

void CpuBackend::dropout_add_forward(float* out, const float* residual, const float* branch,
                                     int B, size_t per_sample, const DropoutSpec& dropout) {
  for_each_chunk(B, per_sample, [&](int b, size_t first, size_t n, size_t offset) {
    if (!residual) {  // out = dropout(branch), perhaps in place
      float multipliers[kChunk];
      if (dropout.active())
        cpu::dropout_multipliers(multipliers, dropout, static_cast<uint32_t>(b), first, n);
      else
        std::fill(multipliers, multipliers + n, 1.0f);
#pragma omp simd
      for (size_t e = 0; e < n; ++e) out[offset + e] = branch[offset + e] * multipliers[e];
    } else if (dropout.active()) {
      float multipliers[kChunk];
      cpu::dropout_multipliers(multipliers, dropout, static_cast<uint32_t>(b), first, n);
#pragma omp simd
      for (size_t e = 0; e < n; ++e)
        out[offset + e] = residual[offset + e] + branch[offset + e] * multipliers[e];
    } else {
#pragma omp simd
      for (size_t e = 0; e < n; ++e) out[offset + e] = residual[offset + e] + branch[offset + e];
    }
  });
}

void CpuBackend::dropout_add_backward(float* dbranch, const float* dout, int B, size_t per_sample,
                                      const DropoutSpec& dropout) {
  if (!dropout.active()) {
    if (dbranch != dout)
      copy_device(dbranch, dout, static_cast<size_t>(B) * per_sample * sizeof(float));
    return;
  }
  for_each_chunk(B, per_sample, [&](int b, size_t first, size_t n, size_t offset) {
    float multipliers[kChunk];
    cpu::dropout_multipliers(multipliers, dropout, static_cast<uint32_t>(b), first, n);
#pragma omp simd
    for (size_t e = 0; e < n; ++e) dbranch[offset + e] = dout[offset + e] * multipliers[e];
  });
}

}  // namespace folio
