// FLOPs per token, MFU, and the measured matmul peak that stands for a CPU's.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/backend.h"
#include "config/presets.h"
#include "model/parameter_layout.h"
#include "train/mfu.h"

namespace folio {
namespace {

TEST(Mfu, FlopsPerTokenOfTheSeedModel) {
  const ModelShape shape = ModelShape::from_config(load_config("shakespeare_char"), 65);
  const size_t parameters = ParameterLayout(shape).total();
  ASSERT_EQ(parameters, 10788929u);
  // 6 N + 12 L T C = 64.7M + 7.1M: about 72 MFLOP per token.
  EXPECT_DOUBLE_EQ(training_flops_per_token(shape, parameters),
                   6.0 * 10788929 + 12.0 * 6 * 256 * 384);
}

TEST(Mfu, UtilisationIsAchievedOverPeakAndUnknownWithoutAPeak) {
  EXPECT_DOUBLE_EQ(model_flops_utilization(1000, 1e6, 4e9), 0.25);
  EXPECT_TRUE(std::isnan(model_flops_utilization(1000, 1e6, 0)));
}

TEST(Mfu, MeasuredMatmulPeakIsAPlausibleRate) {
  std::unique_ptr<Backend> backend = make_backend("cpu", 1);
  const double flops = measure_matmul_flops(*backend, 128, 0.01);
  EXPECT_GT(flops, 1e8);  // far below any CPU that runs the tests
  EXPECT_LT(flops, 1e13);
}

}  // namespace
}  // namespace folio
