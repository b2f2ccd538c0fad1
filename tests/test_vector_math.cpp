// The CPU backend's row reductions (backend/cpu/vector_math.h): lanes, a vector body and a tail,
// so every length from 1 to past several vectors, with the answer placed in each part.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/vector_math.h"
#include "test_helpers.h"

namespace folio {
namespace {

using testing::random_vector;

TEST(VectorMath, RowMaxFindsTheLargestWhereverItIs) {
  for (int n = 1; n <= 70; ++n) {
    const std::vector<float> base = random_vector<float>(size_t(n), 71 + n);
    for (int at = 0; at < n; ++at) {  // the largest in the first lane, the body, the tail
      std::vector<float> x = base;
      x[size_t(at)] = 100.0f + float(at);
      EXPECT_EQ(cpu::row_max(x.data(), n), x[size_t(at)]) << "n " << n << ", largest at " << at;
    }
    EXPECT_EQ(cpu::row_max(base.data(), n), *std::max_element(base.begin(), base.end()));
  }
}

TEST(VectorMath, RowDotEqualsTheDoubleSum) {
  for (int n = 1; n <= 70; ++n) {
    const std::vector<float> a = random_vector<float>(size_t(n), 5 + n);
    const std::vector<float> b = random_vector<float>(size_t(n), 500 + n);
    double exact = 0.0, magnitude = 0.0;
    for (int j = 0; j < n; ++j) {
      exact += double(a[size_t(j)]) * b[size_t(j)];
      magnitude += std::abs(double(a[size_t(j)]) * b[size_t(j)]);
    }
    EXPECT_NEAR(cpu::row_dot(a.data(), b.data(), n), exact, 1e-6 * magnitude) << "n " << n;
  }
}

}  // namespace
}  // namespace folio
