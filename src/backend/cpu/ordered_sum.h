// The CPU backend's sums of many floats (sum, sum_of_squares: the gradients' norm for clipping),
// in double and in an order that depends on nothing but their count.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace folio::cpu {

// Sums in double, in an order fixed by n alone: chunks of kSumChunk values, each summed in 16
// lanes (lane j takes every 16th value from j) whose totals are added in order, then the chunks'
// totals added in order. So the result depends neither on timing (an OpenMP reduction clause
// combines in whatever order threads finish: clipping, and everything after it, must be
// bit-reproducible, as resume needs), nor on the thread count, nor on the vector width the
// backend was built for: ranks on hosts with other core counts or instruction sets compute the
// same squared norm of the same summed gradients, where a part per thread had let them clip by
// norms an ulp apart and their weights drift. The lanes vectorise at any width (each is its own
// chain of additions; a product of two floats is exact in double, so FMA or not is the same).
inline constexpr size_t kSumChunk = size_t(1) << 16;
inline constexpr int kSumLanes = 16;

template <typename Term>
double ordered_sum(const float* x, size_t n, std::vector<double>& chunk_totals, Term term) {
  const size_t chunks = (n + kSumChunk - 1) / kSumChunk;
  chunk_totals.assign(chunks, 0.0);
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(chunks);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t c = 0; c < count; ++c) {
    const size_t begin = static_cast<size_t>(c) * kSumChunk;
    const size_t end = std::min(n, begin + kSumChunk);
    double lanes[kSumLanes] = {};
    size_t i = begin;
    for (; i + kSumLanes <= end; i += kSumLanes)
#pragma omp simd
      for (int j = 0; j < kSumLanes; ++j) lanes[j] += term(x[i + j]);
    for (int j = 0; i < end; ++i, ++j) lanes[j] += term(x[i]);
    double total = 0.0;
    for (double lane : lanes) total += lane;
    chunk_totals[static_cast<size_t>(c)] = total;
  }
  double total = 0.0;
  for (double chunk : chunk_totals) total += chunk;
  return total;
}

}  // namespace folio::cpu
