// The CPU backend keeps a forward pass's dropout masks as bits for its backward pass
// (backend/cpu/dropout_masks.h) instead of drawing them again. The masks it recalls must be the
// ones it would have drawn: a backward pass after its own forward (which recorded them) must give
// exactly, bit for bit, the gradients of a backward pass on a backend whose last forward was
// another step's (so it records nothing usable and draws again). Attention and the residual
// branches, in fp32 and bf16 (attention with bf16 products where the CPU has them), with rows that are
// not multiples of 64 elements.
#include <gtest/gtest.h>

#include <vector>

#include "backend/backend.h"
#include "test_helpers.h"

namespace folio {
namespace {

using testing::random_vector;
using Floats = std::vector<float>;

DropoutSpec attention_dropout(uint32_t step) {
  return dropout_spec(0.2f, 7, step, 0, DropoutSite::kAttentionWeights, 3);
}
DropoutSpec residual_dropout(uint32_t step) {
  return dropout_spec(0.2f, 7, step, 0, DropoutSite::kFeedForwardOutput, 3);
}

// dqkv of a backward pass with step 5's masks after step 5's forward; with `another_forward`,
// after which a forward of step 6 (into other buffers) replaced the recording. T and hs: the
// strips (70, 32), or a block and heads short enough for the short-block kernels (16, 10).
Floats attention_gradient(const char* dtype, bool another_forward, int T, int hs) {
  const int B = 2, H = 2, A = H * hs;
  auto backend = make_backend("cpu", 0, BackendOptions{dtype});
  const Floats qkv = random_vector<float>(size_t(B) * T * 3 * A, 1);
  const Floats dout = random_vector<float>(size_t(B) * T * A, 2);
  Floats out(size_t(B) * T * A), saved(backend->attention_saved_floats(B, T, H, hs));
  Floats dqkv(qkv.size());
  backend->attention_forward(out.data(), saved.data(), qkv.data(), B, T, H, hs, 0,
                             attention_dropout(5));
  if (another_forward) {
    Floats other_out(out.size()), other_saved(saved.size());
    backend->attention_forward(other_out.data(), other_saved.data(), qkv.data(), B, T, H, hs, 0,
                               attention_dropout(6));
  }
  backend->attention_backward(dqkv.data(), dout.data(), qkv.data(), saved.data(), B, T, H, hs,
                              attention_dropout(5), ReadBy::kAnyOp);
  return dqkv;
}

// d(branch) of the fused residual add + LayerNorm, likewise.
Floats residual_gradient(const char* dtype, bool another_forward) {
  const int B = 3, T = 5, C = 70;
  const size_t per_sample = size_t(T) * C, n = B * per_sample;
  auto backend = make_backend("cpu", 0, BackendOptions{dtype});
  const Floats residual = random_vector<float>(n, 3), branch = random_vector<float>(n, 4);
  const Floats weight = random_vector<float>(C, 5), bias = random_vector<float>(C, 6);
  const Floats dout = random_vector<float>(n, 7);
  Floats residual_out(n), ln_out(n), mean(B * T), rstd(B * T);
  backend->dropout_add_layernorm_forward(residual_out.data(), ln_out.data(), mean.data(),
                                         rstd.data(), residual.data(), branch.data(),
                                         weight.data(), bias.data(), B, per_sample, C,
                                         residual_dropout(5), ReadBy::kAnyOp);
  if (another_forward) {
    Floats other_out(n), other_ln(n), other_mean(B * T), other_rstd(B * T);
    backend->dropout_add_layernorm_forward(other_out.data(), other_ln.data(), other_mean.data(),
                                           other_rstd.data(), residual.data(), branch.data(),
                                           weight.data(), bias.data(), B, per_sample, C,
                                           residual_dropout(6), ReadBy::kAnyOp);
  }
  Floats dinp(n, 0.0f), dbranch(n), dweight(C, 0.0f), dbias(C, 0.0f);
  backend->layernorm_dropout_add_backward(dinp.data(), dbranch.data(), dweight.data(),
                                          dbias.data(), dout.data(), residual_out.data(),
                                          weight.data(), mean.data(), rstd.data(), B, per_sample,
                                          C, residual_dropout(5));
  return dbranch;
}

TEST(CpuDropoutMasks, RecalledMasksAreTheMasksDrawnAgain) {
  for (const char* dtype : {"fp32", "bf16"}) {
    SCOPED_TRACE(dtype);
    // Recalled from step 5's forward, or drawn again after step 6's replaced the recording.
    EXPECT_EQ(attention_gradient(dtype, false, 70, 32), attention_gradient(dtype, true, 70, 32));
    EXPECT_EQ(attention_gradient(dtype, false, 16, 10), attention_gradient(dtype, true, 16, 10));
    EXPECT_EQ(residual_gradient(dtype, false), residual_gradient(dtype, true));
  }
}

}  // namespace
}  // namespace folio
