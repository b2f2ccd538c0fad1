// Every reference op's backward against central finite differences, in double precision.
// Each check differentiates L = sum(out * R) for a fixed random R, so the analytic gradient is the
// op's backward with dout = R.
#include <gtest/gtest.h>

#include <functional>

#include "backend/reference/activation.h"
#include "backend/reference/attention.h"
#include "backend/reference/cross_entropy.h"
#include "backend/reference/dropout_add.h"
#include "backend/reference/embedding.h"
#include "backend/reference/layernorm.h"
#include "backend/reference/matmul.h"
#include "test_helpers.h"

namespace folio {
namespace {

using Vec = std::vector<double>;
using testing::random_vector;
using testing::relative_error;

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Numerical gradient of loss() with respect to x (which loss() reads), by central differences.
Vec numerical_gradient(Vec& x, const std::function<double()>& loss, double h = 1e-6) {
  Vec gradient(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double plus = loss();
    x[i] = saved - h;
    const double minus = loss();
    x[i] = saved;
    gradient[i] = (plus - minus) / (2 * h);
  }
  return gradient;
}

constexpr double kTolerance = 1e-7;

TEST(ReferenceGradients, Embedding) {
  const int V = 5, B = 2, T = 3, C = 4;
  const std::vector<int32_t> tokens = {0, 3, 3, 4, 1, 3};
  Vec wte = random_vector<double>(V * C, 1), wpe = random_vector<double>(T * C, 2);
  const Vec R = random_vector<double>(B * T * C, 3);
  Vec out(B * T * C);
  auto loss = [&] {
    reference::embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, 0);
    return dot(out, R);
  };
  Vec dwte(V * C, 0.0), dwpe(T * C, 0.0);
  reference::embedding_backward(dwte.data(), dwpe.data(), R.data(), tokens.data(), B, T, C);
  EXPECT_LT(relative_error(dwte, numerical_gradient(wte, loss)), kTolerance);
  EXPECT_LT(relative_error(dwpe, numerical_gradient(wpe, loss)), kTolerance);
}

class ReferenceGradientsWithBias : public ::testing::TestWithParam<bool> {};

TEST_P(ReferenceGradientsWithBias, LayerNorm) {
  const bool with_bias = GetParam();
  const int N = 3, C = 8;
  Vec x = random_vector<double>(N * C, 4), w = random_vector<double>(C, 5),
      b = random_vector<double>(C, 6);
  const Vec R = random_vector<double>(N * C, 7);
  Vec out(N * C), mean(N), rstd(N);
  auto loss = [&] {
    reference::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(),
                                 with_bias ? b.data() : nullptr, N, C);
    return dot(out, R);
  };
  loss();
  Vec dx(N * C, 0.0), dw(C, 0.0), db(C, 0.0);
  reference::layernorm_backward(dx.data(), dw.data(), with_bias ? db.data() : nullptr, R.data(),
                                x.data(), w.data(), mean.data(), rstd.data(), N, C);
  EXPECT_LT(relative_error(dx, numerical_gradient(x, loss)), kTolerance);
  EXPECT_LT(relative_error(dw, numerical_gradient(w, loss)), kTolerance);
  if (with_bias) {
    EXPECT_LT(relative_error(db, numerical_gradient(b, loss)), kTolerance);
  }
}

TEST_P(ReferenceGradientsWithBias, Matmul) {
  const bool with_bias = GetParam();
  const int N = 4, IC = 5, OC = 3;
  Vec x = random_vector<double>(N * IC, 8), w = random_vector<double>(OC * IC, 9),
      b = random_vector<double>(OC, 10);
  const Vec R = random_vector<double>(N * OC, 11);
  Vec out(N * OC);
  auto loss = [&] {
    reference::matmul_forward(out.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, N,
                              IC, OC);
    return dot(out, R);
  };
  Vec dx(N * IC, 0.0), dw(OC * IC, 0.0), db(OC, 0.0);
  reference::matmul_backward(dx.data(), dw.data(), with_bias ? db.data() : nullptr, R.data(),
                             x.data(), w.data(), N, IC, OC);
  EXPECT_LT(relative_error(dx, numerical_gradient(x, loss)), kTolerance);
  EXPECT_LT(relative_error(dw, numerical_gradient(w, loss)), kTolerance);
  if (with_bias) {
    EXPECT_LT(relative_error(db, numerical_gradient(b, loss)), kTolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Bias, ReferenceGradientsWithBias, ::testing::Bool());

class ReferenceGradientsWithDropout : public ::testing::TestWithParam<float> {};

TEST_P(ReferenceGradientsWithDropout, Attention) {
  const int B = 2, T = 5, H = 2, hs = 3, A = H * hs;
  const DropoutSpec dropout = GetParam() > 0 ? dropout_spec(GetParam(), 99, 4, 1,
                                                            DropoutSite::kAttentionWeights, 6)
                                             : no_dropout();
  Vec qkv = random_vector<double>(B * T * 3 * A, 12);
  const Vec R = random_vector<double>(B * T * A, 13);
  Vec out(B * T * A), probs(B * H * T * T);
  auto loss = [&] {
    reference::attention_forward(out.data(), probs.data(), qkv.data(), B, T, H, hs, 0, dropout);
    return dot(out, R);
  };
  loss();
  Vec dqkv(qkv.size());
  reference::attention_backward(dqkv.data(), R.data(), qkv.data(), probs.data(), B, T, H, hs,
                                dropout);
  EXPECT_LT(relative_error(dqkv, numerical_gradient(qkv, loss)), kTolerance);
}

TEST_P(ReferenceGradientsWithDropout, DropoutAdd) {
  const int B = 3;
  const size_t per_sample = 7;
  const DropoutSpec dropout = GetParam() > 0 ? dropout_spec(GetParam(), 5, 1, 0,
                                                            DropoutSite::kFeedForwardOutput, 2)
                                             : no_dropout();
  Vec residual = random_vector<double>(B * per_sample, 14),
      branch = random_vector<double>(B * per_sample, 15);
  const Vec R = random_vector<double>(B * per_sample, 16);
  Vec out(B * per_sample);
  auto loss = [&] {
    reference::dropout_add_forward(out.data(), residual.data(), branch.data(), B, per_sample,
                                   dropout);
    return dot(out, R);
  };
  Vec dbranch(B * per_sample);
  reference::dropout_add_backward(dbranch.data(), R.data(), B, per_sample, dropout);
  EXPECT_LT(relative_error(dbranch, numerical_gradient(branch, loss)), kTolerance);
  EXPECT_LT(relative_error(R, numerical_gradient(residual, loss)), kTolerance);  // identity
}

INSTANTIATE_TEST_SUITE_P(Dropout, ReferenceGradientsWithDropout, ::testing::Values(0.0f, 0.3f));

class ReferenceGradientsActivation : public ::testing::TestWithParam<Activation> {};

TEST_P(ReferenceGradientsActivation, Activation) {
  const size_t n = 40;
  Vec x = random_vector<double>(n, 17, 2.0);
  for (double& v : x)
    if (std::abs(v) < 1e-3) v = 0.5;  // ReLU has no derivative at 0
  const Vec R = random_vector<double>(n, 18);
  Vec out(n);
  auto loss = [&] {
    reference::activation_forward(out.data(), x.data(), n, GetParam());
    return dot(out, R);
  };
  Vec dx(n);
  reference::activation_backward(dx.data(), R.data(), x.data(), n, GetParam());
  EXPECT_LT(relative_error(dx, numerical_gradient(x, loss)), kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Kinds, ReferenceGradientsActivation,
                         ::testing::Values(Activation::kRelu, Activation::kGelu,
                                           Activation::kGeluTanh));

TEST(ReferenceGradients, CrossEntropy) {
  const int N = 4, V = 6;
  const std::vector<int32_t> targets = {0, 5, 2, 2};
  const double dloss = 0.25;
  Vec logits = random_vector<double>(N * V, 19, 2.0);
  Vec losses(N);
  auto loss = [&] {
    reference::cross_entropy_forward(losses.data(), logits.data(), targets.data(), N, V);
    double total = 0;
    for (double l : losses) total += l;
    return dloss * total;
  };
  Vec dlogits(N * V);
  reference::cross_entropy_backward(dlogits.data(), logits.data(), targets.data(), N, V, dloss);
  EXPECT_LT(relative_error(dlogits, numerical_gradient(logits, loss)), kTolerance);
  // And the value itself: uniform logits give log(V).
  Vec flat(V, 0.3);
  const int32_t target = 1;
  double value;
  reference::cross_entropy_forward(&value, flat.data(), &target, 1, V);
  EXPECT_NEAR(value, std::log(6.0), 1e-12);
}

}  // namespace
}  // namespace folio
