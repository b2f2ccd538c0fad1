// The statistics a softmax over a row needs, gathered in one pass ("online softmax": Milakov and
// Gimelshein 2018; FlashAttention keeps its rows' statistics the same way): the running maximum
// and the sum of exp(z - maximum), rescaled whenever the maximum grows. Reading a row once for
// both, where a maximum and then a sum read it twice, matters where a row is too wide to stay in
// cache: GPT-2's logits are 50,304 floats a row, 3.3 GB for the GPU's 16 x 1024 tokens.
//
// Two statistics combine into those of both parts' values, so the lanes of a warp each gather
// their own columns and then merge. combine_statistics(a, b) gives the same bits as
// combine_statistics(b, a), so every lane of a butterfly merge ends with the same bits. A NaN
// anywhere in a row makes its statistics NaN, as a maximum and then a sum would. Host and device
// share this code: the CPU tests check it against the two-pass statistics
// (test_softmax_statistics.cpp).
#pragma once

#include <cmath>

#include "core/host_device.h"

namespace folio {

struct SoftmaxStatistics {
  float max = -INFINITY;  // the largest value seen
  float sum = 0.0f;       // sum of exp(z - max) over the values seen
};

FOLIO_HOST_DEVICE void add_to_statistics(SoftmaxStatistics& s, float z) {
  if (!(z <= s.max)) {  // a larger value, or a NaN: then max and sum are NaN from here on
    s.sum = s.sum * expf(s.max - z) + 1.0f;  // the old terms rescaled to the new maximum
    s.max = z;
  } else if (s.max > -INFINITY) {  // (z = max = -inf: nothing to add, and exp(-inf + inf) is NaN)
    s.sum += expf(z - s.max);
  }
}

FOLIO_HOST_DEVICE SoftmaxStatistics combine_statistics(SoftmaxStatistics a, SoftmaxStatistics b) {
  if (b.max == -INFINITY) return a;  // b has seen no value (or only -inf, which adds 0)
  if (a.max == -INFINITY) return b;
  // The pair in one order whichever lane merges it: the compiler may fuse x * y + u * v into
  // fma(x, y, u * v), which rounds differently from fma(u, v, x * y) (nvcc does so by default).
  if (b.max > a.max || (b.max == a.max && b.sum > a.sum)) {
    const SoftmaxStatistics larger = b;
    b = a;
    a = larger;
  }
  const float max = fmaxf(a.max, b.max);  // a NaN in one: fmaxf takes the other, its sum carries it
  return {max, a.sum * expf(a.max - max) + b.sum * expf(b.max - max)};
}

// log(sum over the row of exp(z)): the loss of target t is this minus z[t]
FOLIO_HOST_DEVICE float log_sum_exp(const SoftmaxStatistics& s) {
  return logf(s.sum) + s.max;
}

}  // namespace folio
