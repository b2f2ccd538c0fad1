// The CPU backend's row reductions (backend/cpu/vector_math.h): lanes, a vector body and a tail,
// so every length from 1 to past several vectors, with the answer placed in each part; and the
// small products of attention (backend/cpu/small_products.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/small_products.h"
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

// GELU's normal CDF and gaussian against libm in double precision, over the range where they
// change and past it, where the CDF must reach 0 and 1 (a wrong coefficient of the erfc fit
// moves the CDF by 1e-3 or more; a wrong sign of the branch by up to 1).
TEST(VectorMath, NormalCdfAndGaussianAgreeWithLibm) {
  double worst_cdf = 0.0, worst_gaussian = 0.0;
  for (int i = -20000; i <= 20000; ++i) {
    const float x = float(i) * 0.0005f;  // -10 to 10
    float gaussian = 0.0f;
    const double cdf = cpu::vnormal_cdf(x, gaussian);
    const double want_cdf = 0.5 * std::erfc(-double(x) / std::sqrt(2.0));
    const double want_gaussian = std::exp(-0.5 * double(x) * x);
    worst_cdf = std::max(worst_cdf, std::abs(cdf - want_cdf));
    worst_gaussian = std::max(worst_gaussian, std::abs(gaussian - want_gaussian));
  }
  EXPECT_LT(worst_cdf, 2.5e-7);       // 1.5e-7 from the fit, the rest fp32 rounding
  EXPECT_LT(worst_gaussian, 2.5e-7);  // vexp's 2 ulp of values up to 1, and x^2 rounded
}

// Phi(x) alone (GELU's forward pass) against libm the same way; a wrong coefficient of the
// rational fit moves it by 1e-5 or more, a wrong clamp past |x| = 5.66 by up to 1.
TEST(VectorMath, NormalCdfAloneAgreesWithLibm) {
  double worst = 0.0;
  for (int i = -40000; i <= 40000; ++i) {
    const float x = float(i) * 0.00025f;  // -10 to 10
    const double want = 0.5 * std::erfc(-double(x) / std::sqrt(2.0));
    worst = std::max(worst, std::abs(double(cpu::vnormal_cdf(x)) - want));
  }
  EXPECT_LT(worst, 2.0e-7);  // 1.5e-9 from the fit, the rest fp32 rounding
}

// Every transpose, beta 0 (C's old values, NaN here, never read) and 1, widths of C from one
// lane to four full vectors with and without a tail, and a product over the size limit that goes
// to the BLAS. This binary calls the build's portable copy; the AVX2 and AVX-512 ones run under
// the attention cases of the op table (BackendOps.Attention, cpu_kernels_*), which use them.
TEST(VectorMath, SmallProductEqualsTheDoubleProduct) {
  struct Shape {
    int M, N, K;
  };
  for (const Shape& shape : {Shape{1, 1, 1}, Shape{16, 16, 10}, Shape{16, 10, 16}, Shape{5, 17, 3},
                             Shape{2, 33, 64}, Shape{2, 64, 64}, Shape{32, 64, 4},
                             Shape{70, 64, 32}}) {
    ASSERT_EQ(cpu::fits_small_product(shape.M, shape.N, shape.K), shape.M != 70);
    const int M = shape.M, N = shape.N, K = shape.K;
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {0.0f, 1.0f}) {
          SCOPED_TRACE(::testing::Message() << M << " x " << N << " x " << K << " ta " << ta
                                            << " tb " << tb << " beta " << beta);
          // Leading dimensions wider than the matrices, as attention's slices of qkv are.
          const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 5;
          const std::vector<float> A = random_vector<float>(size_t(ta ? K : M) * lda, 3);
          const std::vector<float> B = random_vector<float>(size_t(tb ? N : K) * ldb, 4);
          std::vector<float> C = random_vector<float>(size_t(M) * ldc, 5);
          if (beta == 0.0f) std::fill(C.begin(), C.end(), std::nanf(""));
          const std::vector<float> before = C;
          const float alpha = 0.75f;
          cpu::small_product(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(),
                             ldc);
          for (int i = 0; i < M; ++i)
            for (int j = 0; j < ldc; ++j) {
              const size_t at = size_t(i) * ldc + j;
              if (j >= N) {  // between rows: untouched
                EXPECT_TRUE(std::isnan(before[at]) ? std::isnan(C[at]) : C[at] == before[at]);
                continue;
              }
              double exact = 0.0, magnitude = 0.0;
              for (int k = 0; k < K; ++k) {
                const double a = ta ? A[size_t(k) * lda + i] : A[size_t(i) * lda + k];
                const double b = tb ? B[size_t(j) * ldb + k] : B[size_t(k) * ldb + j];
                exact += a * b;
                magnitude += std::abs(a * b);
              }
              exact = alpha * exact + (beta != 0.0f ? beta * double(before[at]) : 0.0);
              ASSERT_NEAR(C[at], exact,
                          1e-6 * (magnitude + (beta != 0.0f ? std::abs(before[at]) : 0.0)) + 1e-7)
                  << "row " << i << " column " << j;
            }
        }
  }
}

}  // namespace
}  // namespace folio
