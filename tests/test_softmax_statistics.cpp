// The one-pass softmax statistics (src/core/softmax_statistics.h) as the GPU's cross-entropy
// gathers them: 32 lanes, each over its own columns (one at a time, or four at a time as the
// kernels read rows whose width is a whole number of quads), merged by an xor butterfly. Against
// the two-pass statistics in double precision, on rows that make the running maximum grow often
// (rising values), never (falling), and rows far beyond exp's range; and every lane must end with
// the same bits, or the lanes of one row would compute different gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

// Compiled here as nvcc compiles it for the GPU, which fuses a * b + c * d into fma(a, b, c * d):
// that is not symmetric in its two products, and a merge written as that sum made the two lanes
// of a pair disagree in the last bit in about 1 merge of 10. (This file's own code is unchanged:
// only these inline functions are built with FMA, and the tests skip on a CPU without it.)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
#pragma GCC target("fma")
#include "core/softmax_statistics.h"
#pragma GCC pop_options

#include "test_helpers.h"

namespace folio {
namespace {

constexpr int kLanes = 32;

// The statistics every lane holds after the warp's merge, as row_statistics() in
// src/backend/cuda/cross_entropy.cu computes them.
std::vector<SoftmaxStatistics> lanes_after_merge(const std::vector<float>& z, int V,
                                                 bool by_quads) {
  std::vector<SoftmaxStatistics> lane(kLanes);
  for (int l = 0; l < kLanes; ++l) {
    if (by_quads) {
      for (int q = l; 4 * q < V; q += kLanes)
        for (int k = 0; k < 4 && 4 * q + k < V; ++k) add_to_statistics(lane[l], z[4 * q + k]);
    } else {
      for (int v = l; v < V; v += kLanes) add_to_statistics(lane[l], z[v]);
    }
  }
  for (int offset = kLanes / 2; offset > 0; offset /= 2) {
    std::vector<SoftmaxStatistics> merged(kLanes);
    for (int l = 0; l < kLanes; ++l) merged[l] = combine_statistics(lane[l], lane[l ^ offset]);
    lane = merged;
  }
  return lane;
}

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof(float)) == 0;
}

void check_row(const std::vector<float>& z, const char* what) {
  const int V = static_cast<int>(z.size());
  const double max = *std::max_element(z.begin(), z.end());
  double sum = 0.0;
  for (float x : z) sum += std::exp(double(x) - max);
  for (bool by_quads : {false, true}) {
    SCOPED_TRACE(::testing::Message() << what << ", V " << V << (by_quads ? ", quads" : ""));
    const std::vector<SoftmaxStatistics> lanes = lanes_after_merge(z, V, by_quads);
    for (const SoftmaxStatistics& s : lanes)
      ASSERT_TRUE(same_bits(s.max, lanes[0].max) && same_bits(s.sum, lanes[0].sum))
          << "the lanes disagree";
    EXPECT_EQ(double(lanes[0].max), max);
    EXPECT_NEAR(lanes[0].sum, sum, 2e-6 * sum);
    EXPECT_NEAR(log_sum_exp(lanes[0]), std::log(sum) + max, 2e-6 * (1.0 + std::fabs(max)));
  }
}

bool cpu_fuses_multiply_add() {
  return __builtin_cpu_supports("fma");
}

TEST(SoftmaxStatistics, OnePassOverLanesMatchesTwoPasses) {
  if (!cpu_fuses_multiply_add()) GTEST_SKIP() << "this CPU has no FMA instructions";
  for (int V : {1, 5, 31, 32, 65, 1000, 50257}) {
    std::vector<float> random = testing::random_vector<float>(V, 71 + V, 3.0);
    check_row(random, "random");
    std::vector<float> rising(V), falling(V);
    for (int v = 0; v < V; ++v) {
      rising[v] = -20.0f + 40.0f * float(v) / float(V);
      falling[v] = -rising[v];
    }
    check_row(rising, "rising");
    check_row(falling, "falling");
    // spans far beyond exp's range (e^88): terms must be rescaled, never taken from 0
    check_row(testing::random_vector<float>(V, 97 + V, 60.0), "wide");
  }
}

TEST(SoftmaxStatistics, ANanAnywhereInTheRowMakesItsStatisticsNan) {
  // As a maximum and then a sum would: the CPU's cross-entropy gives NaN for such a row, and so
  // must the GPU's, whichever lane meets the NaN and whatever it met before (a NaN before a
  // lane's first value was once dropped, giving a finite loss).
  if (!cpu_fuses_multiply_add()) GTEST_SKIP() << "this CPU has no FMA instructions";
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int V : {1, 4, 33, 200, 1000}) {
    for (int at : {0, 1, V / 2, V - 1}) {
      if (at >= V) continue;
      std::vector<float> z = testing::random_vector<float>(V, 13 + V, 3.0);
      z[at] = nan;
      for (bool by_quads : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "V " << V << ", NaN at " << at << (by_quads ? ", quads" : ""));
        for (const SoftmaxStatistics& s : lanes_after_merge(z, V, by_quads))
          ASSERT_TRUE(std::isnan(log_sum_exp(s)));
      }
    }
  }
}

TEST(SoftmaxStatistics, EmptyStatisticsChangeNothing) {
  // Lanes past the end of a short row gather nothing and then merge: no NaN, no change.
  SoftmaxStatistics empty, seen;
  add_to_statistics(seen, 2.5f);
  add_to_statistics(seen, -1.0f);
  for (const SoftmaxStatistics& s :
       {combine_statistics(seen, empty), combine_statistics(empty, seen)}) {
    EXPECT_EQ(s.max, seen.max);
    EXPECT_EQ(s.sum, seen.sum);
  }
  const SoftmaxStatistics none = combine_statistics(empty, empty);
  EXPECT_EQ(none.max, -INFINITY);
  EXPECT_EQ(none.sum, 0.0f);
  SoftmaxStatistics minus_infinity;  // a column of -inf adds exp(-inf) = 0
  add_to_statistics(minus_infinity, -INFINITY);
  EXPECT_EQ(minus_infinity.sum, 0.0f);
  add_to_statistics(minus_infinity, 1.0f);
  EXPECT_EQ(minus_infinity.sum, 1.0f);
  EXPECT_EQ(minus_infinity.max, 1.0f);
}

}  // namespace
}  // namespace folio
