// Every op of every backend against the double-precision reference (backend/reference), forward
// and backward: one table of checks, run for each backend (cpu, and cuda, whose rows skip
// without a visible GPU, or fail with FOLIO_REQUIRE_GPU=1). fp32 results must agree to 1e-5
// relative (||backend - ref|| / ||ref||).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <string>
#include <utility>
#include <tuple>

#include "backend/backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/ordered_sum.h"
#include "backend/device_buffer.h"
#include "backend/reference/activation.h"
#include "backend/reference/attention.h"
#include "backend/reference/cross_entropy.h"
#include "backend/reference/dropout_add.h"
#include "backend/reference/embedding.h"
#include "backend/reference/layernorm.h"
#include "backend/reference/matmul.h"
#include "backend/reference/optimizer.h"
#include "gpu/require_gpu.h"
#include "test_helpers.h"

namespace folio {
namespace {

using testing::random_vector;
using testing::relative_error;
using Doubles = std::vector<double>;
using Floats = std::vector<float>;

constexpr double kTolerance = 1e-5;

Doubles widen(const Floats& values) { return Doubles(values.begin(), values.end()); }

class BackendOps : public ::testing::TestWithParam<std::string> {
 protected:
  // fp32 everywhere: a GPU backend's bf16 has its own tolerances (tests/gpu).
  void SetUp() override {
    if (GetParam() == "cuda") FOLIO_SKIP_WITHOUT_GPU();
    backend_ = make_backend(GetParam(), 0, BackendOptions{"fp32"});
  }

  template <typename T>
  DeviceBuffer upload(const std::vector<T>& host) {
    DeviceBuffer buffer(*backend_, std::max<size_t>(1, host.size()) * sizeof(T));
    backend_->copy_to_device(buffer.get(), host.data(), host.size() * sizeof(T));
    return buffer;
  }
  DeviceBuffer zeros(size_t n) {
    DeviceBuffer buffer(*backend_, std::max<size_t>(1, n) * sizeof(float));
    backend_->fill_zero(buffer.get(), n * sizeof(float));
    return buffer;
  }
  // Fills a device buffer with NaN so that an element the op forgets to write shows up.
  DeviceBuffer poisoned(size_t n) { return upload(Floats(n, std::nanf(""))); }
  Floats download(const DeviceBuffer& buffer, size_t n) {
    Floats host(n);
    backend_->synchronize();
    backend_->copy_to_host(host.data(), buffer.get(), n * sizeof(float));
    return host;
  }
  std::unique_ptr<Backend> backend_;
};

TEST_P(BackendOps, Embedding) {
  const int V = 11, B = 3, T = 5, C = 19, first_position = 2, Tmax = 8;
  const std::vector<int32_t> tokens = {0, 3, 3, 10, 1, 3, 7, 7, 7, 2, 0, 0, 9, 5, 4};
  const Floats wte = random_vector<float>(V * C, 1), wpe = random_vector<float>(Tmax * C, 2);
  const Floats dout = random_vector<float>(B * T * C, 3);
  auto d_tokens = upload(tokens);
  auto d_wte = upload(wte), d_wpe = upload(wpe), d_out = poisoned(B * T * C);
  backend_->embedding_forward(d_out.as<float>(), d_tokens.as<int32_t>(), d_wte.as<float>(),
                              d_wpe.as<float>(), B, T, C, first_position);
  Doubles out(B * T * C);
  reference::embedding_forward(out.data(), tokens.data(), widen(wte).data(),
                               widen(wpe).data(), B, T, C, first_position);
  EXPECT_LT(relative_error(download(d_out, out.size()), out), kTolerance);

  // Backward accumulates onto what the gradients already hold.
  const Floats dwte0 = random_vector<float>(V * C, 4), dwpe0 = random_vector<float>(T * C, 5);
  auto d_dwte = upload(dwte0), d_dwpe = upload(dwpe0), d_dout = upload(dout);
  backend_->embedding_backward(d_dwte.as<float>(), d_dwpe.as<float>(), d_dout.as<float>(),
                               d_tokens.as<int32_t>(), B, T, C);
  Doubles dwte = widen(dwte0), dwpe = widen(dwpe0);
  reference::embedding_backward(dwte.data(), dwpe.data(), widen(dout).data(), tokens.data(), B,
                                T, C);
  EXPECT_LT(relative_error(download(d_dwte, dwte.size()), dwte), kTolerance);
  EXPECT_LT(relative_error(download(d_dwpe, dwpe.size()), dwpe), kTolerance);
}

TEST_P(BackendOps, LayerNorm) {
  for (bool with_bias : {true, false}) {
    const int N = 37, C = 53;
    const Floats x = random_vector<float>(N * C, 6, 3.0), w = random_vector<float>(C, 7),
                 b = random_vector<float>(C, 8), dout = random_vector<float>(N * C, 9);
    const Floats dx0 = random_vector<float>(N * C, 10), dw0 = random_vector<float>(C, 11),
                 db0 = random_vector<float>(C, 12);
    auto d_x = upload(x), d_w = upload(w), d_b = upload(b), d_dout = upload(dout);
    auto d_out = poisoned(N * C), d_mean = poisoned(N), d_rstd = poisoned(N);
    backend_->layernorm_forward(d_out.as<float>(), d_mean.as<float>(), d_rstd.as<float>(),
                                d_x.as<float>(), d_w.as<float>(),
                                with_bias ? d_b.as<float>() : nullptr, N, C, ReadBy::kAnyOp);
    Doubles out(N * C), mean(N), rstd(N);
    reference::layernorm_forward(out.data(), mean.data(), rstd.data(), widen(x).data(),
                                 widen(w).data(), with_bias ? widen(b).data() : nullptr, N, C);
    EXPECT_LT(relative_error(download(d_out, out.size()), out), kTolerance);
    EXPECT_LT(relative_error(download(d_mean, N), mean), kTolerance);
    EXPECT_LT(relative_error(download(d_rstd, N), rstd), kTolerance);

    auto d_dx = upload(dx0), d_dw = upload(dw0), d_db = upload(db0);
    backend_->layernorm_backward(d_dx.as<float>(), d_dw.as<float>(),
                                 with_bias ? d_db.as<float>() : nullptr, d_dout.as<float>(),
                                 d_x.as<float>(), d_w.as<float>(), d_mean.as<float>(),
                                 d_rstd.as<float>(), N, C);
    Doubles dx = widen(dx0), dw = widen(dw0), db = widen(db0);
    reference::layernorm_backward(dx.data(), dw.data(), with_bias ? db.data() : nullptr,
                                  widen(dout).data(), widen(x).data(), widen(w).data(),
                                  mean.data(), rstd.data(), N, C);
    EXPECT_LT(relative_error(download(d_dx, dx.size()), dx), kTolerance) << with_bias;
    EXPECT_LT(relative_error(download(d_dw, dw.size()), dw), kTolerance) << with_bias;
    if (with_bias) {
      EXPECT_LT(relative_error(download(d_db, db.size()), db), kTolerance);
    } else {
      EXPECT_EQ(download(d_db, db.size()), db0);  // untouched
    }
  }
}

TEST_P(BackendOps, Matmul) {
  // 67 rows; then a few rows, as generation's (the CPU's threads then split the columns)
  for (const auto& [N, IC, OC] : {std::tuple{67, 33, 29}, {1, 33, 29}, {5, 40, 70}}) {
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE(::testing::Message() << N << "x" << IC << "x" << OC << " bias " << with_bias);
      const Floats x = random_vector<float>(N * IC, 13), w = random_vector<float>(OC * IC, 14),
                   b = random_vector<float>(OC, 15), dout = random_vector<float>(N * OC, 16);
      const Floats dw0 = random_vector<float>(OC * IC, 17), db0 = random_vector<float>(OC, 18);
      auto d_x = upload(x), d_w = upload(w), d_b = upload(b), d_dout = upload(dout);
      auto d_out = poisoned(N * OC);
      backend_->matmul_forward(d_out.as<float>(), d_x.as<float>(), d_w.as<float>(),
                               with_bias ? d_b.as<float>() : nullptr, N, IC, OC);
      Doubles out(N * OC);
      reference::matmul_forward(out.data(), widen(x).data(), widen(w).data(),
                                with_bias ? widen(b).data() : nullptr, N, IC, OC);
      EXPECT_LT(relative_error(download(d_out, out.size()), out), kTolerance);

      // kAdd adds the gradients to dw0 and db0; kWrite replaces whatever was there (NaN here).
      for (GradientUpdate update : {GradientUpdate::kAdd, GradientUpdate::kWrite}) {
        SCOPED_TRACE(update == GradientUpdate::kAdd ? "add" : "write");
        const bool add = update == GradientUpdate::kAdd;
        auto d_dx = poisoned(N * IC);
        auto d_dw = add ? upload(dw0) : poisoned(OC * IC), d_db = add ? upload(db0) : poisoned(OC);
        backend_->matmul_backward(d_dx.as<float>(), d_dw.as<float>(),
                                  with_bias ? d_db.as<float>() : nullptr, d_dout.as<float>(),
                                  d_x.as<float>(), d_w.as<float>(), N, IC, OC, update);
        Doubles dx(N * IC), dw = add ? widen(dw0) : Doubles(OC * IC, 0.0),
                            db = add ? widen(db0) : Doubles(OC, 0.0);
        reference::matmul_backward(dx.data(), dw.data(), with_bias ? db.data() : nullptr,
                                   widen(dout).data(), widen(x).data(), widen(w).data(), N, IC, OC);
        EXPECT_LT(relative_error(download(d_dx, dx.size()), dx), kTolerance);
        EXPECT_LT(relative_error(download(d_dw, dw.size()), dw), kTolerance);
        if (with_bias) {
          EXPECT_LT(relative_error(download(d_db, db.size()), db), kTolerance);
        }
      }
    }
  }
}

struct AttentionCase {
  int B, T, H, hs;
  float p;
};

TEST_P(BackendOps, Attention) {
  // The CPU backend works in strips of 64 query rows: T = 70 and 130 end in a partial strip, 64
  // and 128 fill them exactly, T = 1 is one row; hs * H != any C, as in the tiny preset; heads of
  // 10 (tiny) and 64 (GPT-2). tiny's own (T 16, heads of 10), T = 24, 32 and 64 with heads of 4,
  // 8 and 2 are products small enough for the CPU's register kernel (small_products.h), whose
  // rows of C take one to four AVX-512 vectors (two to eight AVX2 ones), with or without a tail.
  // Blocks and heads of at most 16 (one AVX-512 vector, two AVX2 ones) take the CPU's
  // short-block kernels (attention_short_blocks.h): T 16 with heads of 16 and 10, T 9 and 8
  // (one AVX2 vector and a part of the next, or one whole), and T 17 and heads of 17 just past.
  for (const AttentionCase& c :
       {AttentionCase{2, 16, 2, 16, 0.2f}, AttentionCase{2, 9, 2, 12, 0.3f},
        AttentionCase{1, 8, 2, 8, 0.2f}, AttentionCase{2, 17, 1, 16, 0.2f},
        AttentionCase{1, 16, 1, 17, 0.2f}, AttentionCase{2, 16, 3, 10, 0.0f},
        AttentionCase{2, 7, 3, 4, 0.0f}, AttentionCase{2, 7, 3, 4, 0.25f},
        AttentionCase{2, 16, 3, 10, 0.2f}, AttentionCase{2, 24, 2, 4, 0.2f},
        AttentionCase{1, 32, 2, 8, 0.1f}, AttentionCase{1, 64, 1, 2, 0.0f},
        AttentionCase{1, 70, 2, 5, 0.0f}, AttentionCase{2, 70, 3, 10, 0.2f},
        AttentionCase{3, 1, 2, 8, 0.2f}, AttentionCase{1, 1, 1, 64, 0.0f},
        AttentionCase{1, 64, 2, 64, 0.2f}, AttentionCase{2, 128, 1, 10, 0.1f},
        AttentionCase{1, 130, 2, 64, 0.2f}, AttentionCase{1, 130, 1, 64, 0.0f}}) {
    SCOPED_TRACE(::testing::Message() << "B " << c.B << " T " << c.T << " H " << c.H << " hs "
                                    << c.hs << " p " << c.p);
    const int A = c.H * c.hs;
    const DropoutSpec dropout =
        c.p > 0 ? dropout_spec(c.p, 1337, 12, 3, DropoutSite::kAttentionWeights, 5) : no_dropout();
    const Floats qkv = random_vector<float>(size_t(c.B) * c.T * 3 * A, 19, 1.5);
    const Floats dout = random_vector<float>(size_t(c.B) * c.T * A, 20);
    auto d_qkv = upload(qkv), d_dout = upload(dout);
    auto d_out = poisoned(size_t(c.B) * c.T * A);
    auto d_saved = poisoned(backend_->attention_saved_floats(c.B, c.T, c.H, c.hs));
    backend_->attention_forward(d_out.as<float>(), d_saved.as<float>(), d_qkv.as<float>(), c.B,
                                c.T, c.H, c.hs, 0, dropout);
    Doubles out(size_t(c.B) * c.T * A), probs(size_t(c.B) * c.H * c.T * c.T);
    reference::attention_forward(out.data(), probs.data(), widen(qkv).data(), c.B, c.T, c.H, c.hs,
                                 0, dropout);
    EXPECT_LT(relative_error(download(d_out, out.size()), out), kTolerance);

    auto d_dqkv = poisoned(qkv.size());
    backend_->attention_backward(d_dqkv.as<float>(), d_dout.as<float>(), d_qkv.as<float>(),
                                 d_saved.as<float>(), c.B, c.T, c.H, c.hs, dropout, ReadBy::kAnyOp);
    Doubles dqkv(qkv.size());
    reference::attention_backward(dqkv.data(), widen(dout).data(), widen(qkv).data(),
                                  probs.data(), c.B, c.T, c.H, c.hs, dropout);
    EXPECT_LT(relative_error(download(d_dqkv, dqkv.size()), dqkv), kTolerance);
  }
}

struct QStartCase {
  int T, hs, q_start;
};

TEST_P(BackendOps, AttentionRecomputesOnlyTheRowsAfterQStart) {
  // Generation's key/value cache: rows before q_start are kept, the rest computed anew; in the
  // second case they start inside one of the CPU backend's 64-row strips and end in another.
  for (const QStartCase& c : {QStartCase{9, 4, 6}, QStartCase{150, 64, 100}}) {
    SCOPED_TRACE(::testing::Message() << "T " << c.T << " q_start " << c.q_start);
    const int B = 1, T = c.T, H = 2, hs = c.hs, A = H * hs, q_start = c.q_start;
    const Floats qkv = random_vector<float>(size_t(T) * 3 * A, 21);
    Doubles out(size_t(T) * A), probs(size_t(H) * T * T);
    reference::attention_forward(out.data(), probs.data(), widen(qkv).data(), B, T, H, hs, 0,
                                 no_dropout());
    // Kept rows hold sentinels (which the cache would hold: nothing may recompute or clear them),
    // the rest NaN (everything there must be written).
    const size_t kept = size_t(q_start) * A;
    Floats start(out.size(), std::nanf(""));
    for (size_t i = 0; i < kept; ++i) start[i] = 1000.0f + static_cast<float>(i);
    auto d_qkv = upload(qkv), d_out = upload(start);
    auto d_saved = zeros(backend_->attention_saved_floats(B, T, H, hs));
    backend_->attention_forward(d_out.as<float>(), d_saved.as<float>(), d_qkv.as<float>(), B, T, H,
                                hs, q_start, no_dropout());
    const Floats got = download(d_out, out.size());
    EXPECT_EQ(Floats(got.begin(), got.begin() + kept), Floats(start.begin(), start.begin() + kept))
        << "rows before q_start were written";
    const Floats computed(got.begin() + kept, got.end());
    EXPECT_LT(relative_error(computed, Doubles(out.begin() + kept, out.end())), kTolerance);
  }
}

TEST_P(BackendOps, Activation) {
  for (Activation kind : {Activation::kRelu, Activation::kGelu, Activation::kGeluTanh}) {
    SCOPED_TRACE(activation_name(kind));
    const size_t n = 10007;
    const Floats x = random_vector<float>(n, 22, 3.0), dout = random_vector<float>(n, 23);
    auto d_x = upload(x), d_dout = upload(dout), d_out = poisoned(n), d_dx = poisoned(n);
    backend_->activation_forward(d_out.as<float>(), d_x.as<float>(), n, kind, ReadBy::kAnyOp);
    backend_->activation_backward(d_dx.as<float>(), d_dout.as<float>(), d_x.as<float>(), n, kind,
                                  ReadBy::kAnyOp);
    Doubles out(n), dx(n);
    reference::activation_forward(out.data(), widen(x).data(), n, kind);
    reference::activation_backward(dx.data(), widen(dout).data(), widen(x).data(), n, kind);
    EXPECT_LT(relative_error(download(d_out, n), out), kTolerance);
    EXPECT_LT(relative_error(download(d_dx, n), dx), kTolerance);
    // With fp32 products an output only the next product reads is still written: it reads that.
    auto d_for_product = poisoned(n), d_gradient_for_product = poisoned(n);
    backend_->activation_forward(d_for_product.as<float>(), d_x.as<float>(), n, kind,
                                 ReadBy::kNextProduct);
    EXPECT_LT(relative_error(download(d_for_product, n), out), kTolerance);
    backend_->activation_backward(d_gradient_for_product.as<float>(), d_dout.as<float>(),
                                  d_x.as<float>(), n, kind, ReadBy::kNextProduct);
    EXPECT_LT(relative_error(download(d_gradient_for_product, n), dx), kTolerance);

    // In place (the model's d_fc holds fc_act's gradient, then fc's; a ReLU model's fc is its
    // fc_act), and ReLU's derivative read from its output, as a ReLU model keeps only that.
    auto in_place = upload(x), gradient_in_place = upload(dout);
    backend_->activation_forward(in_place.as<float>(), in_place.as<float>(), n, kind,
                                 ReadBy::kAnyOp);
    EXPECT_LT(relative_error(download(in_place, n), out), kTolerance);
    const float* derivative_from = kind == Activation::kRelu ? in_place.as<float>() : d_x.as<float>();
    backend_->activation_backward(gradient_in_place.as<float>(), gradient_in_place.as<float>(),
                                  derivative_from, n, kind, ReadBy::kAnyOp);
    EXPECT_LT(relative_error(download(gradient_in_place, n), dx), kTolerance);
  }
}

TEST_P(BackendOps, MatmulActivationFused) {
  // The fused pair against reference::matmul_forward then reference::activation_forward.
  for (Activation kind : {Activation::kRelu, Activation::kGelu, Activation::kGeluTanh}) {
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE(::testing::Message() << activation_name(kind) << " bias " << with_bias);
      const int N = 67, IC = 33, OC = 29;
      const Floats x = random_vector<float>(N * IC, 60), w = random_vector<float>(OC * IC, 61),
                   b = random_vector<float>(OC, 62, 2.0);
      auto d_x = upload(x), d_w = upload(w), d_b = upload(b);
      auto d_pre = poisoned(N * OC), d_out = poisoned(N * OC);
      backend_->matmul_activation_forward(d_pre.as<float>(), d_out.as<float>(), d_x.as<float>(),
                                          d_w.as<float>(), with_bias ? d_b.as<float>() : nullptr, N,
                                          IC, OC, kind, ReadBy::kAnyOp);
      Doubles pre(N * OC), out(N * OC);
      reference::matmul_forward(pre.data(), widen(x).data(), widen(w).data(),
                                with_bias ? widen(b).data() : nullptr, N, IC, OC);
      reference::activation_forward(out.data(), pre.data(), pre.size(), kind);
      EXPECT_LT(relative_error(download(d_pre, pre.size()), pre), kTolerance);
      EXPECT_LT(relative_error(download(d_out, out.size()), out), kTolerance);
      // pre and out the same tensor: only the activation is kept
      auto d_both = poisoned(N * OC);
      backend_->matmul_activation_forward(d_both.as<float>(), d_both.as<float>(), d_x.as<float>(),
                                          d_w.as<float>(), with_bias ? d_b.as<float>() : nullptr,
                                          N, IC, OC, kind, ReadBy::kAnyOp);
      EXPECT_LT(relative_error(download(d_both, out.size()), out), kTolerance);
    }
  }
}

TEST_P(BackendOps, MatmulBackwardIntoActivationFused) {
  // The backward pair (fc2's products, then the activation's backward in place) against
  // reference::matmul_backward then reference::activation_backward; for ReLU, pre is its output
  // (the model keeps only that), for GELU its input.
  for (Activation kind : {Activation::kRelu, Activation::kGelu, Activation::kGeluTanh}) {
    SCOPED_TRACE(activation_name(kind));
    const int N = 67, IC = 33, OC = 29;
    const Floats pre_input = random_vector<float>(N * IC, 63),
                 w = random_vector<float>(OC * IC, 64), dout = random_vector<float>(N * OC, 65);
    Doubles pre(N * IC);
    reference::activation_forward(pre.data(), widen(pre_input).data(), pre.size(), kind);
    const Doubles inp = pre;  // fc2's input: the activation's output
    if (kind != Activation::kRelu) pre = widen(pre_input);
    const Floats pre_floats(pre.begin(), pre.end()), inp_floats(inp.begin(), inp.end());
    auto d_pre = upload(pre_floats), d_inp = upload(inp_floats), d_w = upload(w),
         d_dout = upload(dout);
    auto d_dpre = poisoned(N * IC), d_dw = poisoned(OC * IC), d_db = poisoned(OC);
    backend_->matmul_backward_into_activation(
        d_dpre.as<float>(), d_dw.as<float>(), d_db.as<float>(), d_dout.as<float>(),
        d_inp.as<float>(), d_w.as<float>(), d_pre.as<float>(), N, IC, OC, GradientUpdate::kWrite,
        kind, ReadBy::kAnyOp);
    Doubles dpre(N * IC), dw(OC * IC, 0.0), db(OC, 0.0);
    reference::matmul_backward(dpre.data(), dw.data(), db.data(), widen(dout).data(),
                               widen(inp_floats).data(), widen(w).data(), N, IC, OC);
    reference::activation_backward(dpre.data(), dpre.data(), widen(pre_floats).data(), dpre.size(),
                                   kind);
    EXPECT_LT(relative_error(download(d_dpre, dpre.size()), dpre), kTolerance);
    EXPECT_LT(relative_error(download(d_dw, dw.size()), dw), kTolerance);
    EXPECT_LT(relative_error(download(d_db, db.size()), db), kTolerance);
  }
}

TEST_P(BackendOps, DropoutAdd) {
  for (float p : {0.0f, 0.2f}) {
    const int B = 3;
    const size_t per_sample = 5000;  // crosses the CPU backend's 4096-element chunks
    const DropoutSpec dropout =
        p > 0 ? dropout_spec(p, 42, 7, 4, DropoutSite::kAttentionOutput, 9) : no_dropout();
    const Floats residual = random_vector<float>(B * per_sample, 24),
                 branch = random_vector<float>(B * per_sample, 25),
                 dout = random_vector<float>(B * per_sample, 26);
    auto d_residual = upload(residual), d_branch = upload(branch), d_dout = upload(dout);
    auto d_out = poisoned(B * per_sample), d_dbranch = poisoned(B * per_sample);
    backend_->dropout_add_forward(d_out.as<float>(), d_residual.as<float>(), d_branch.as<float>(),
                                  B, per_sample, dropout);
    backend_->dropout_add_backward(d_dbranch.as<float>(), d_dout.as<float>(), B, per_sample,
                                   dropout);
    Doubles out(B * per_sample), dbranch(B * per_sample);
    reference::dropout_add_forward(out.data(), widen(residual).data(), widen(branch).data(), B,
                                   per_sample, dropout);
    reference::dropout_add_backward(dbranch.data(), widen(dout).data(), B, per_sample, dropout);
    EXPECT_LT(relative_error(download(d_out, out.size()), out), kTolerance) << p;
    EXPECT_LT(relative_error(download(d_dbranch, dbranch.size()), dbranch), kTolerance) << p;
  }
}

// The embeddings' dropout: no residual, in place (out is the branch, dbranch the gradient).
TEST_P(BackendOps, DropoutAloneInPlace) {
  for (float p : {0.0f, 0.2f}) {
    const int B = 3;
    const size_t per_sample = 5000;
    const DropoutSpec dropout =
        p > 0 ? dropout_spec(p, 42, 7, 0, DropoutSite::kEmbedding, 9) : no_dropout();
    const Floats branch = random_vector<float>(B * per_sample, 27),
                 dout = random_vector<float>(B * per_sample, 28);
    auto d_x = upload(branch), d_g = upload(dout);
    backend_->dropout_add_forward(d_x.as<float>(), nullptr, d_x.as<float>(), B, per_sample,
                                  dropout);
    backend_->dropout_add_backward(d_g.as<float>(), d_g.as<float>(), B, per_sample, dropout);
    Doubles out(B * per_sample), dbranch(B * per_sample);
    reference::dropout_add_forward<double>(out.data(), nullptr, widen(branch).data(), B,
                                           per_sample, dropout);
    reference::dropout_add_backward(dbranch.data(), widen(dout).data(), B, per_sample, dropout);
    const Floats got = download(d_x, out.size());
    EXPECT_LT(relative_error(got, out), kTolerance) << p;
    EXPECT_LT(relative_error(download(d_g, dbranch.size()), dbranch), kTolerance) << p;
    if (p > 0) {  // about p of the elements dropped: the mask is drawn, not skipped
      const auto dropped = std::count(got.begin(), got.end(), 0.0f);
      EXPECT_NEAR(static_cast<double>(dropped) / got.size(), p, 0.02);
    }
  }
}

TEST_P(BackendOps, DropoutAddLayerNormFused) {
  // The fused pairs against the two reference ops in turn. C = 53 is not a multiple of 4, so a
  // row's dropout mask starts inside a Philox block; 5 or 13 rows per sample (the CPU draws 9 such
  // rows' masks at once: a sample in one draw, or in a full and a partial one); dinp accumulates.
  for (const auto& [p, rows_per_sample] : {std::pair{0.0f, 5}, {0.2f, 5}, {0.2f, 13}}) {
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "p " << p << " rows per sample " << rows_per_sample
                                        << " bias " << with_bias);
      const int B = 3, C = 53, N = B * rows_per_sample;
      const size_t per_sample = size_t(rows_per_sample) * C;
      const DropoutSpec dropout =
          p > 0 ? dropout_spec(p, 77, 3, 2, DropoutSite::kFeedForwardOutput, 4) : no_dropout();
      const Floats residual = random_vector<float>(N * C, 50, 2.0),
                   branch = random_vector<float>(N * C, 51, 2.0), w = random_vector<float>(C, 52),
                   b = random_vector<float>(C, 53), dout = random_vector<float>(N * C, 54);
      const Floats dx0 = random_vector<float>(N * C, 55), dw0 = random_vector<float>(C, 56),
                   db0 = random_vector<float>(C, 57);
      auto d_residual = upload(residual), d_branch = upload(branch), d_w = upload(w),
           d_b = upload(b), d_dout = upload(dout);
      auto d_sum = poisoned(N * C), d_ln = poisoned(N * C), d_mean = poisoned(N),
           d_rstd = poisoned(N);
      const float* bias = with_bias ? d_b.as<float>() : nullptr;
      backend_->dropout_add_layernorm_forward(d_sum.as<float>(), d_ln.as<float>(),
                                              d_mean.as<float>(), d_rstd.as<float>(),
                                              d_residual.as<float>(), d_branch.as<float>(),
                                              d_w.as<float>(), bias, B, per_sample, C, dropout,
                                              ReadBy::kAnyOp);
      Doubles sum(N * C), ln(N * C), mean(N), rstd(N);
      reference::dropout_add_forward(sum.data(), widen(residual).data(), widen(branch).data(), B,
                                     per_sample, dropout);
      reference::layernorm_forward(ln.data(), mean.data(), rstd.data(), sum.data(), widen(w).data(),
                                   with_bias ? widen(b).data() : nullptr, N, C);
      EXPECT_LT(relative_error(download(d_sum, sum.size()), sum), kTolerance);
      EXPECT_LT(relative_error(download(d_ln, ln.size()), ln), kTolerance);
      EXPECT_LT(relative_error(download(d_mean, N), mean), kTolerance);
      EXPECT_LT(relative_error(download(d_rstd, N), rstd), kTolerance);

      auto d_dx = upload(dx0), d_dw = upload(dw0), d_db = upload(db0), d_dbranch = poisoned(N * C);
      backend_->layernorm_dropout_add_backward(
          d_dx.as<float>(), d_dbranch.as<float>(), d_dw.as<float>(),
          with_bias ? d_db.as<float>() : nullptr, d_dout.as<float>(), d_sum.as<float>(),
          d_w.as<float>(), d_mean.as<float>(), d_rstd.as<float>(), B, per_sample, C, dropout);
      Doubles dx = widen(dx0), dw = widen(dw0), db = widen(db0), dbranch(N * C);
      reference::layernorm_backward(dx.data(), dw.data(), with_bias ? db.data() : nullptr,
                                    widen(dout).data(), sum.data(), widen(w).data(), mean.data(),
                                    rstd.data(), N, C);
      reference::dropout_add_backward(dbranch.data(), dx.data(), B, per_sample, dropout);
      EXPECT_LT(relative_error(download(d_dx, dx.size()), dx), kTolerance);
      EXPECT_LT(relative_error(download(d_dbranch, dbranch.size()), dbranch), kTolerance);
      EXPECT_LT(relative_error(download(d_dw, dw.size()), dw), kTolerance);
      if (with_bias) {
        EXPECT_LT(relative_error(download(d_db, db.size()), db), kTolerance);
      } else {
        EXPECT_EQ(download(d_db, db.size()), db0);  // untouched
      }
    }
  }
}

TEST_P(BackendOps, CrossEntropy) {
  // Rows of Vp logits of which the first V are the vocabulary's; the padded columns hold large
  // values that would dominate the softmax if read. Against the reference on the unpadded rows.
  // Vp = 68: rows a whole number of quads, which the GPU reads four columns at a time (the last
  // quad of the vocabulary one column of it and three of padding).
  const int N = 29, V = 65;
  const float dloss = 1.0f / N;
  std::vector<int32_t> targets(N);
  for (int i = 0; i < N; ++i) targets[i] = (i * 37) % V;
  const Floats logits = random_vector<float>(N * V, 27, 4.0);
  Doubles losses(N), dlogits(N * V);
  reference::cross_entropy_forward(losses.data(), widen(logits).data(), targets.data(), N, V, V);
  reference::cross_entropy_backward(dlogits.data(), widen(logits).data(), targets.data(), N, V, V,
                                    double(dloss));
  for (int Vp : {V, V + 27, V + 3}) {
    SCOPED_TRACE(::testing::Message() << "Vp " << Vp);
    Floats padded(size_t(N) * Vp, 50.0f);
    for (int i = 0; i < N; ++i)
      std::copy_n(logits.begin() + size_t(i) * V, V, padded.begin() + size_t(i) * Vp);
    auto d_logits = upload(padded), d_targets = upload(targets);
    auto d_losses = poisoned(N), d_dlogits = poisoned(size_t(N) * Vp);
    backend_->cross_entropy_forward(d_losses.as<float>(), d_logits.as<float>(),
                                    d_targets.as<int32_t>(), N, V, Vp);
    backend_->cross_entropy_backward(d_dlogits.as<float>(), d_logits.as<float>(),
                                     d_targets.as<int32_t>(), N, V, Vp, dloss, ReadBy::kAnyOp);
    EXPECT_LT(relative_error(download(d_losses, N), losses), kTolerance);
    const Floats got = download(d_dlogits, size_t(N) * Vp);
    Floats vocabulary_columns, padding_columns;
    for (int i = 0; i < N; ++i) {
      const auto row = got.begin() + size_t(i) * Vp;
      vocabulary_columns.insert(vocabulary_columns.end(), row, row + V);
      padding_columns.insert(padding_columns.end(), row + V, row + Vp);
    }
    EXPECT_LT(relative_error(vocabulary_columns, dlogits), kTolerance);
    EXPECT_EQ(padding_columns, Floats(size_t(N) * (Vp - V), 0.0f)) << "padding's gradient not 0";
    // In place, as the model runs it: the gradient replaces the logits, the same values.
    backend_->cross_entropy_backward(d_logits.as<float>(), d_logits.as<float>(),
                                     d_targets.as<int32_t>(), N, V, Vp, dloss, ReadBy::kAnyOp);
    EXPECT_EQ(download(d_logits, size_t(N) * Vp), got) << "in place differs";
  }
}

// Softmaxes whose rows span far more than exp's range (e^88): each must shift its row by the
// row's largest value, or e^(x - shift) saturates and the result is wrong by order 1 (a shift
// by the smallest value, or by 0, fails this; the tests above, whose rows span a few units,
// cannot tell, since a softmax is the same for any shift that does not overflow). Cross-entropy:
// logits of standard deviation 40 (rows of 65 span about 250), against the reference to 1e-5.
// Attention: q, k of standard deviation 6 with heads of 64, scores of standard deviation about
// 36 (rows span about 200); the fp32 scores of that size carry about 1e-5 absolute error, which
// exp makes a relative error of that size in the weights, so 1e-3 against the reference.
TEST_P(BackendOps, SoftmaxRowsFarBeyondExpsRangeShiftByTheirLargest) {
  {
    const int N = 23, V = 65;
    std::vector<int32_t> targets(N);
    for (int i = 0; i < N; ++i) targets[i] = (i * 29) % V;
    const Floats logits = random_vector<float>(N * V, 61, 40.0);
    Doubles losses(N), dlogits(N * V);
    reference::cross_entropy_forward(losses.data(), widen(logits).data(), targets.data(), N, V, V);
    reference::cross_entropy_backward(dlogits.data(), widen(logits).data(), targets.data(), N, V,
                                      V, 1.0 / N);
    auto d_logits = upload(logits), d_targets = upload(targets);
    auto d_losses = poisoned(N), d_dlogits = poisoned(size_t(N) * V);
    backend_->cross_entropy_forward(d_losses.as<float>(), d_logits.as<float>(),
                                    d_targets.as<int32_t>(), N, V, V);
    backend_->cross_entropy_backward(d_dlogits.as<float>(), d_logits.as<float>(),
                                     d_targets.as<int32_t>(), N, V, V, 1.0f / N, ReadBy::kAnyOp);
    EXPECT_LT(relative_error(download(d_losses, N), losses), kTolerance);
    EXPECT_LT(relative_error(download(d_dlogits, size_t(N) * V), dlogits), kTolerance);
  }
  const int B = 1, T = 70, H = 2, hs = 64, A = H * hs;
  const Floats qkv = random_vector<float>(size_t(B) * T * 3 * A, 62, 6.0);
  const Floats dout = random_vector<float>(size_t(B) * T * A, 63);
  auto d_qkv = upload(qkv), d_dout = upload(dout);
  auto d_out = poisoned(size_t(B) * T * A);
  auto d_saved = poisoned(backend_->attention_saved_floats(B, T, H, hs));
  backend_->attention_forward(d_out.as<float>(), d_saved.as<float>(), d_qkv.as<float>(), B, T, H,
                              hs, 0, no_dropout());
  Doubles out(size_t(B) * T * A), probs(size_t(B) * H * T * T);
  reference::attention_forward(out.data(), probs.data(), widen(qkv).data(), B, T, H, hs, 0,
                               no_dropout());
  EXPECT_LT(relative_error(download(d_out, out.size()), out), 1e-3);
  auto d_dqkv = poisoned(qkv.size());
  backend_->attention_backward(d_dqkv.as<float>(), d_dout.as<float>(), d_qkv.as<float>(),
                               d_saved.as<float>(), B, T, H, hs, no_dropout(), ReadBy::kAnyOp);
  Doubles dqkv(qkv.size());
  reference::attention_backward(dqkv.data(), widen(dout).data(), widen(qkv).data(), probs.data(),
                                B, T, H, hs, no_dropout());
  EXPECT_LT(relative_error(download(d_dqkv, dqkv.size()), dqkv), 1e-3);
}

// Three updates: unclipped, clipped to half the gradients' norm (the moments then hold half the
// gradient), and with a bound above the norm (no change). Clipping is read, not written: the
// gradients stay as they were.
TEST_P(BackendOps, AdamWWithClipping) {
  const size_t n = 4099;
  Floats params = random_vector<float>(n, 28), m(n, 0.0f), v(n, 0.0f);
  auto d_params = upload(params), d_m = upload(m), d_v = upload(v);
  Doubles params_ref = widen(params), m_ref(n, 0.0), v_ref(n, 0.0);
  for (int step = 1; step <= 3; ++step) {
    const Floats grads = random_vector<float>(n, 29 + step);
    auto d_grads = upload(grads);
    float squared_norm = 0.0f;
    for (float g : grads) squared_norm += g * g;
    auto d_squared_norm = upload(Floats{squared_norm});
    AdamWStep update{1e-2, 0.9, 0.99, 1e-8, 0.1, step};
    AdamWStep reference_update = update;
    if (step > 1) {
      const float bound = std::sqrt(squared_norm) * (step == 2 ? 0.5f : 2.0f);
      update.clip_squared_norm = d_squared_norm.as<float>();
      reference_update.clip_squared_norm = &squared_norm;
      update.clip_max_norm = reference_update.clip_max_norm = bound;
    }
    backend_->adamw_update(d_params.as<float>(), d_grads.as<float>(), d_m.as<float>(),
                           d_v.as<float>(), n, update);
    reference::adamw_update(params_ref.data(), widen(grads).data(), m_ref.data(), v_ref.data(),
                            n, reference_update);
    EXPECT_EQ(download(d_grads, n), grads) << "step " << step << " wrote the gradients";
  }
  EXPECT_LT(relative_error(download(d_params, n), params_ref), kTolerance);
  EXPECT_LT(relative_error(download(d_m, n), m_ref), kTolerance);
  EXPECT_LT(relative_error(download(d_v, n), v_ref), kTolerance);
}

TEST_P(BackendOps, Reductions) {
  const size_t n = 100003;
  const Floats x = random_vector<float>(n, 40);
  auto d_x = upload(x), d_result = poisoned(1);
  backend_->sum(d_result.as<float>(), d_x.as<float>(), n);
  const double sum = reference::sum(widen(x).data(), n);
  EXPECT_NEAR(download(d_result, 1)[0], sum, 1e-5 * std::sqrt(double(n)));
  backend_->sum_of_squares(d_result.as<float>(), d_x.as<float>(), n);
  const double squares = reference::sum_of_squares(widen(x).data(), n);
  EXPECT_NEAR(download(d_result, 1)[0] / squares, 1.0, kTolerance);
  backend_->scale(d_x.as<float>(), n, 2.0f);
  Doubles doubled = widen(x);
  for (double& c : doubled) c *= 2;
  EXPECT_LT(relative_error(download(d_x, n), doubled), kTolerance);
}

// The sums themselves, in double (the backends round them to float, which hides all but a rare
// difference): the same bits on 1, 2, 3 and 5 threads (a part per thread gave other bits).
TEST(CpuReductions, OrderedSumsInDoubleAreTheSameBitsOnAnyThreads) {
  const size_t n = 5 * cpu::kSumChunk + 77;
  const Floats x = random_vector<float>(n, 42);
  std::vector<double> scratch;
  const auto square = [](float v) { return double(v) * double(v); };
  std::vector<double> sums;
  const int threads_before = omp_get_max_threads();
  for (int threads : {1, 2, 3, 5}) {
    omp_set_num_threads(threads);
    sums.push_back(cpu::ordered_sum(x.data(), n, scratch, square));
  }
  omp_set_num_threads(threads_before);
  for (size_t i = 1; i < sums.size(); ++i) EXPECT_EQ(sums[i], sums[0]) << "run " << i;
  EXPECT_NEAR(sums[0] / reference::sum_of_squares(widen(x).data(), n), 1.0, 1e-12);
}

// Ranks sum the same gradients, then each takes their squared norm for clipping: on hosts with
// other core counts (threads is a host setting) or instruction sets it must be the same bits, or
// their clipping differs by an ulp and their weights drift apart. The CPU backend of every
// variant this machine runs, on 1, 2 and 3 threads, for a length that ends mid-chunk and
// mid-lane (before, a part per thread: 1 and 2 threads gave other bits).
TEST(CpuReductions, SumOfSquaresIsTheSameBitsOnAnyThreadsAndInstructionSet) {
  const size_t n = 3 * (size_t(1) << 16) + 1237;
  const Floats x = random_vector<float>(n, 41);
  std::vector<std::pair<std::string, float>> results;
  const auto add = [&](const std::string& name, std::unique_ptr<Backend> backend) {
    DeviceBuffer d_x(*backend, n * sizeof(float)), d_result(*backend, sizeof(float));
    backend->copy_to_device(d_x.get(), x.data(), n * sizeof(float));
    backend->sum_of_squares(d_result.as<float>(), d_x.as<float>(), n);
    float result = 0;
    backend->copy_to_host(&result, d_result.get(), sizeof(float));
    results.emplace_back(name, result);
  };
  for (int threads : {1, 2, 3}) {
    const std::string on = " on " + std::to_string(threads) + " threads";
    if (cpu::cpu_runs(cpu::Variant::avx512) && cpu::variant_built(cpu::Variant::avx512))
      add("avx512" + on, cpu::make_cpu_backend<cpu::Variant::avx512>(threads, false));
    if (cpu::cpu_runs(cpu::Variant::avx2) && cpu::variant_built(cpu::Variant::avx2))
      add("avx2" + on, cpu::make_cpu_backend<cpu::Variant::avx2>(threads, false));
    add("baseline" + on, cpu::make_cpu_backend<cpu::Variant::baseline>(threads, false));
  }
  for (const auto& [name, result] : results)
    EXPECT_EQ(result, results.front().second) << name << " against " << results.front().first;
  EXPECT_NEAR(results.front().second / reference::sum_of_squares(widen(x).data(), n), 1.0, 1e-6);
}

// The cuda rows are listed whether or not a GPU is there (ctest learns the tests' names once, at
// build time): without one they show as skipped, not absent.
INSTANTIATE_TEST_SUITE_P(AllBackends, BackendOps, ::testing::Values("cpu", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace folio
