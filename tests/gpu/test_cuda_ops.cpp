// The CUDA backend's ops beyond the shared op table (tests/test_backend_ops.cpp runs every op in
// fp32 on small shapes, for every backend): bf16 to stated tolerances, the model's own shapes,
// the fused ops, the unfused attention of the bench ladder, the bookkeeping of bf16 copies, and
// reductions over millions of values. Errors are ||gpu - reference|| / ||reference||.
//
// bf16 tolerances: an operand rounded to bf16 (8 significant bits) is off by up to 2^-9 = 0.2%;
// a product of such operands accumulated in fp32 lands within about 1% of the exact one, and
// attention, whose probabilities and score gradients are rounded once more before their own
// products, within 2% (forward) and 3% (backward).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/shared_kernels.h"
#include "backend/reference/attention.h"
#include "backend/reference/dropout_add.h"
#include "backend/reference/embedding.h"
#include "backend/reference/layernorm.h"
#include "backend/reference/matmul.h"
#include "backend/reference/optimizer.h"
#include "gpu_test_helpers.h"

namespace folio {
namespace {

using testing::cuda_backend;
using testing::random_vector;
using testing::relative_error;
using testing::ScopedEnvironment;
using testing::to_device;
using testing::to_host;
using testing::widened;
using Doubles = std::vector<double>;
using Floats = std::vector<float>;

constexpr double kFp32Tolerance = 1e-5;
constexpr double kBf16Product = 1e-2;
constexpr double kBf16Attention = 2e-2;
constexpr double kBf16AttentionGradient = 3e-2;

class CudaOps : public testing::GpuTest {};

// ---- linear layers ------------------------------------------------------------------------------

void check_matmul(Backend& backend, int N, int IC, int OC, double tolerance) {
  SCOPED_TRACE(::testing::Message() << "N " << N << " IC " << IC << " OC " << OC);
  const Floats x = random_vector<float>(size_t(N) * IC, 1),
               w = random_vector<float>(size_t(OC) * IC, 2), b = random_vector<float>(OC, 3),
               dout = random_vector<float>(size_t(N) * OC, 4),
               dw0 = random_vector<float>(size_t(OC) * IC, 5), db0 = random_vector<float>(OC, 6);
  auto d_x = to_device(backend, x), d_w = to_device(backend, w), d_b = to_device(backend, b);
  auto d_out = to_device(backend, Floats(size_t(N) * OC, NAN));
  backend.matmul_forward(d_out.as<float>(), d_x.as<float>(), d_w.as<float>(), d_b.as<float>(), N,
                         IC, OC);
  Doubles out(size_t(N) * OC);
  reference::matmul_forward(out.data(), widened(x).data(), widened(w).data(), widened(b).data(), N,
                            IC, OC);
  EXPECT_LT(relative_error(to_host(backend, d_out, out.size()), out), tolerance);

  auto d_dout = to_device(backend, dout);
  // kAdd adds the gradients to dw0 and db0; kWrite replaces whatever was there (NaN here).
  for (GradientUpdate update : {GradientUpdate::kAdd, GradientUpdate::kWrite}) {
    SCOPED_TRACE(update == GradientUpdate::kAdd ? "add" : "write");
    const bool add = update == GradientUpdate::kAdd;
    auto d_dx = to_device(backend, Floats(x.size(), NAN));
    auto d_dw = to_device(backend, add ? dw0 : Floats(dw0.size(), NAN));
    auto d_db = to_device(backend, add ? db0 : Floats(db0.size(), NAN));
    backend.matmul_backward(d_dx.as<float>(), d_dw.as<float>(), d_db.as<float>(),
                            d_dout.as<float>(), d_x.as<float>(), d_w.as<float>(), N, IC, OC,
                            update);
    Doubles dx(x.size()), dw = add ? widened(dw0) : Doubles(dw0.size(), 0.0),
                          db = add ? widened(db0) : Doubles(db0.size(), 0.0);
    reference::matmul_backward(dx.data(), dw.data(), db.data(), widened(dout).data(),
                               widened(x).data(), widened(w).data(), N, IC, OC);
    EXPECT_LT(relative_error(to_host(backend, d_dx, dx.size()), dx), tolerance);
    EXPECT_LT(relative_error(to_host(backend, d_dw, dw.size()), dw), tolerance);
    EXPECT_LT(relative_error(to_host(backend, d_db, db.size()), db), tolerance);
  }
}

TEST_F(CudaOps, MatmulInBf16) {
  auto backend = cuda_backend("bf16");
  check_matmul(*backend, 67, 33, 29, kBf16Product);       // odd sizes: unaligned rows
  check_matmul(*backend, 1024, 384, 1536, kBf16Product);  // shakespeare_char's ffwd.net.0
  check_matmul(*backend, 1024, 384, 65, kBf16Product);    // lm_head
}

TEST_F(CudaOps, MatmulInFp32AtTheModelsShapes) {
  auto backend = cuda_backend("fp32");
  check_matmul(*backend, 1024, 1536, 384, kFp32Tolerance);
  check_matmul(*backend, 512, 384, 1152, kFp32Tolerance);
}

TEST_F(CudaOps, MatmulWithTheEpiloguesAndKernelsUnfused) {
  auto backend = cuda_backend("bf16", true, /*fused_kernels=*/false);
  check_matmul(*backend, 256, 384, 1536, kBf16Product);
}

// ---- ReLU's output kept as bf16 (FOLIO_CUDA_RELU_OUTPUT=bf16) -----------------------------------

// The n bf16 values at `device` (memory of `backend`), widened: bf16 is the upper half of an fp32.
Floats read_bf16(Backend& backend, const void* device, size_t n) {
  std::vector<uint16_t> bits(n);
  backend.copy_to_host(bits.data(), device, n * sizeof(uint16_t));
  Floats values(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t word = uint32_t{bits[i]} << 16;
    std::memcpy(&values[i], &word, sizeof(float));
  }
  return values;
}

// ffwd.net.0 into a tensor kept as bf16 (fc = relu(x w^T + b)), then every op that reads it: fc2's
// product, fc2's weight gradient, and ReLU's backward, which reads its signs. Each against the
// reference computed from the values the GPU kept, so that only the op under test's error counts.
void check_relu_output_in_bf16(Backend& backend, int N, int C, int F) {
  SCOPED_TRACE(::testing::Message() << "N " << N << " C " << C << " F " << F);
  ASSERT_TRUE(backend.keeps_as_bf16(ProductOperand::kReluOutput, 64));
  const Floats x = random_vector<float>(size_t(N) * C, 21),
               w = random_vector<float>(size_t(F) * C, 22), b = random_vector<float>(F, 23),
               w2 = random_vector<float>(size_t(C) * F, 24), b2 = random_vector<float>(C, 25),
               dout = random_vector<float>(size_t(N) * C, 26);
  auto d_x = to_device(backend, x), d_w = to_device(backend, w), d_b = to_device(backend, b);
  auto d_w2 = to_device(backend, w2), d_b2 = to_device(backend, b2);
  const size_t n = size_t(N) * F;
  DeviceBuffer d_fc(backend, n * sizeof(uint16_t));
  float* fc = d_fc.as<float>();
  backend.store_as_bf16(fc, n);
  backend.matmul_activation_forward(fc, fc, d_x.as<float>(), d_w.as<float>(), d_b.as<float>(), N, C,
                                    F, Activation::kRelu, ReadBy::kAnyOp);
  const Floats kept = read_bf16(backend, fc, n);
  Doubles expected(n);
  reference::matmul_forward(expected.data(), widened(x).data(), widened(w).data(),
                            widened(b).data(), N, C, F);
  for (double& value : expected) value = std::max(value, 0.0);
  EXPECT_LT(relative_error(kept, expected), kBf16Product);

  auto d_out = to_device(backend, Floats(size_t(N) * C, NAN));
  backend.matmul_forward(d_out.as<float>(), fc, d_w2.as<float>(), d_b2.as<float>(), N, F, C);
  Doubles out(size_t(N) * C);
  reference::matmul_forward(out.data(), widened(kept).data(), widened(w2).data(),
                            widened(b2).data(), N, F, C);
  EXPECT_LT(relative_error(to_host(backend, d_out, out.size()), out), kBf16Product);

  auto d_dout = to_device(backend, dout);
  auto d_dfc = to_device(backend, Floats(n, NAN));
  auto d_dw2 = to_device(backend, Floats(w2.size(), NAN)),
       d_db2 = to_device(backend, Floats(C, NAN));
  backend.matmul_backward(d_dfc.as<float>(), d_dw2.as<float>(), d_db2.as<float>(),
                          d_dout.as<float>(), fc, d_w2.as<float>(), N, F, C,
                          GradientUpdate::kWrite);
  Doubles dfc(n, 0.0), dw2(w2.size(), 0.0), db2(C, 0.0);
  reference::matmul_backward(dfc.data(), dw2.data(), db2.data(), widened(dout).data(),
                             widened(kept).data(), widened(w2).data(), N, F, C);
  const Floats through_fc2 = to_host(backend, d_dfc, n);
  EXPECT_LT(relative_error(through_fc2, dfc), kBf16Product);
  EXPECT_LT(relative_error(to_host(backend, d_dw2, dw2.size()), dw2), kBf16Product);

  // ReLU's backward in place (d_fc holds fc_act's gradient, as the model runs it): exactly the
  // gradient where the kept output is positive, zero elsewhere
  backend.activation_backward(d_dfc.as<float>(), d_dfc.as<float>(), fc, n, Activation::kRelu,
                              ReadBy::kNextProduct);
  const Floats through_relu = to_host(backend, d_dfc, n);
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += through_relu[i] != (kept[i] > 0 ? through_fc2[i] : 0.0f);
  EXPECT_EQ(wrong, 0u);

  // A profiled step splits the op: the product alone into the kept tensor, then ReLU in place.
  backend.matmul_forward(fc, d_x.as<float>(), d_w.as<float>(), d_b.as<float>(), N, C, F);
  backend.activation_forward(fc, fc, n, Activation::kRelu, ReadBy::kAnyOp);
  EXPECT_LT(relative_error(read_bf16(backend, fc, n), expected), kBf16Product);
}

TEST_F(CudaOps, ReluOutputKeptInBf16) {
  {
    ScopedEnvironment fp32("FOLIO_CUDA_RELU_OUTPUT", "fp32");
    EXPECT_FALSE(cuda_backend("bf16")->keeps_as_bf16(ProductOperand::kReluOutput, 64));
  }
  EXPECT_TRUE(cuda_backend("bf16")->keeps_as_bf16(ProductOperand::kReluOutput, 64));  // default
  ScopedEnvironment relu("FOLIO_CUDA_RELU_OUTPUT", "bf16");
  EXPECT_FALSE(cuda_backend("fp32")->keeps_as_bf16(ProductOperand::kReluOutput, 64));
  auto backend = cuda_backend("bf16");
  EXPECT_NE(backend->description().find("a ReLU model's fc kept in bf16"), std::string::npos);
  check_relu_output_in_bf16(*backend, 1024, 384, 1536);  // shakespeare_char's ffwd
  // F = 36: the bf16 output's rows are not 16-byte aligned (computed in fp32, then rounded), and
  // fc2's products run in fp32 on the kept tensor widened
  check_relu_output_in_bf16(*backend, 67, 40, 36);
  const auto& products = dynamic_cast<const CudaBackend&>(*backend).bf16_output_products();
  std::printf("ReLU outputs written as bf16: %d by the product's epilogue, %d rounded after\n",
              products.in_epilogue, products.rounded_after);
  EXPECT_EQ(products.in_epilogue + products.rounded_after, 4);  // two fused, two split
  EXPECT_GE(products.rounded_after, 2);                         // F = 36's
  ScopedEnvironment fallback("FOLIO_GEMM_FALLBACK", "1");       // no epilogues: rounded after
  auto without_epilogues = cuda_backend("bf16");
  check_relu_output_in_bf16(*without_epilogues, 256, 384, 1536);
  EXPECT_EQ(
      dynamic_cast<const CudaBackend&>(*without_epilogues).bf16_output_products().rounded_after, 2);
}

TEST_F(CudaOps, ReluOutputChoiceRefusesAnUnknownValue) {
  ScopedEnvironment relu("FOLIO_CUDA_RELU_OUTPUT", "bf61");
  try {
    cuda_backend("bf16");
    ADD_FAILURE() << "FOLIO_CUDA_RELU_OUTPUT=bf61 was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("FOLIO_CUDA_RELU_OUTPUT=bf61: expected fp32 or bf16"),
              std::string::npos)
        << e.what();
  }
}

// ---- gradients written as their bf16 copy alone (ReadBy::kNextProduct) --------------------------

// What one round of an op and the product after it left: the product's results, and the fp32
// memory of the op's output.
struct RoundResults {
  Floats dinp, dweight, dbias, op_output_fp32;
};

// An op whose output the next product alone reads writes only the bf16 copy that product reads
// once one is kept (the product made it from the op's fp32 values the first time): ReLU's input
// gradient d_fc before fc's backward products, the logits' gradient before the lm_head's. Each
// round runs the model's order, and the first writes fp32 (no copy yet) which the product
// converts; later rounds write the copy alone. The product's results must be the same bits every
// round, and the op's fp32 memory must hold what was there before it (so the copy alone was
// written). With and without cuBLASLt's epilogues: the bias gradient summed by the epilogue, or by
// the kernels from the same bf16 operand. FOLIO_CUDA_GRADIENT_COPIES=both writes the fp32 values
// every round, and the products' results are the same.
TEST_F(CudaOps, GradientsWrittenAsTheirBf16CopyAlone) {
  EXPECT_NE(cuda_backend("bf16")->description().find("written in bf16 alone"), std::string::npos);
  for (const char* copies : {"alone", "both"})
    for (const char* fallback : {"0", "1"}) {
      SCOPED_TRACE(::testing::Message() << "FOLIO_CUDA_GRADIENT_COPIES=" << copies
                                        << " FOLIO_GEMM_FALLBACK=" << fallback);
      ScopedEnvironment alone_or_both("FOLIO_CUDA_GRADIENT_COPIES", copies);
      ScopedEnvironment epilogues("FOLIO_GEMM_FALLBACK", fallback);
      const bool alone = std::strcmp(copies, "alone") == 0;
      auto backend = cuda_backend("bf16");
      {
        // d_fc = (d_branch @ w2) * (fc > 0), in place, then fc's products from ln (N, C)
        const int N = 512, C = 64, F = 256;
        const size_t n = size_t(N) * F;
        const Floats fc = random_vector<float>(n, 31), ln = random_vector<float>(size_t(N) * C, 32),
                     w1 = random_vector<float>(size_t(F) * C, 33),
                     w2 = random_vector<float>(size_t(C) * F, 34),
                     d_branch = random_vector<float>(size_t(N) * C, 35);
        Floats relu_output = fc;
        for (float& value : relu_output) value = std::max(value, 0.0f);
        auto d_fc_act = to_device(*backend, relu_output), d_ln = to_device(*backend, ln),
             d_w1 = to_device(*backend, w1), d_w2 = to_device(*backend, w2),
             d_dbranch = to_device(*backend, d_branch);
        auto d_dfc = to_device(*backend, Floats(n, NAN));
        auto d_dw2 = to_device(*backend, Floats(w2.size())), d_db2 = to_device(*backend, Floats(C));
        auto d_dln = to_device(*backend, Floats(ln.size())),
             d_dw1 = to_device(*backend, Floats(w1.size())), d_db1 = to_device(*backend, Floats(F));
        std::vector<RoundResults> rounds;
        for (int round = 0; round < 3; ++round) {
          backend->matmul_backward(d_dfc.as<float>(), d_dw2.as<float>(), d_db2.as<float>(),
                                   d_dbranch.as<float>(), d_fc_act.as<float>(), d_w2.as<float>(), N,
                                   F, C, GradientUpdate::kWrite);
          const Floats product = to_host(*backend, d_dfc, n);
          backend->activation_backward(d_dfc.as<float>(), d_dfc.as<float>(), d_fc_act.as<float>(),
                                       n, Activation::kRelu, ReadBy::kNextProduct);
          RoundResults r;
          r.op_output_fp32 = to_host(*backend, d_dfc, n);
          backend->matmul_backward(d_dln.as<float>(), d_dw1.as<float>(), d_db1.as<float>(),
                                   d_dfc.as<float>(), d_ln.as<float>(), d_w1.as<float>(), N, C, F,
                                   GradientUpdate::kWrite);
          r.dinp = to_host(*backend, d_dln, ln.size());
          r.dweight = to_host(*backend, d_dw1, w1.size());
          r.dbias = to_host(*backend, d_db1, F);
          size_t unmasked = 0;  // nonzero where ReLU's output is 0: the product's, not the gradient
          for (size_t i = 0; i < n; ++i)
            unmasked += relu_output[i] == 0.0f && r.op_output_fp32[i] != 0;
          if (round == 0 || !alone) {
            EXPECT_EQ(unmasked, 0u) << "round " << round << ": the fp32 gradient is written";
          } else {
            EXPECT_EQ(r.op_output_fp32, product) << "round " << round << " wrote fp32";
            EXPECT_GT(unmasked, n / 4);
          }
          rounds.push_back(r);
        }
        for (int round = 1; round < 3; ++round) {
          EXPECT_EQ(rounds[round].dinp, rounds[0].dinp) << "round " << round;
          EXPECT_EQ(rounds[round].dweight, rounds[0].dweight) << "round " << round;
          EXPECT_EQ(rounds[round].dbias, rounds[0].dbias) << "round " << round;
        }
        // and the gradient is the right one: fc's products against the reference, from the masked
        // fp32 gradient of round 0
        Doubles dln(ln.size()), dw1(w1.size(), 0.0), db1(F, 0.0);
        reference::matmul_backward(dln.data(), dw1.data(), db1.data(),
                                   widened(rounds[0].op_output_fp32).data(), widened(ln).data(),
                                   widened(w1).data(), N, C, F);
        EXPECT_LT(relative_error(rounds[2].dinp, dln), kBf16Product);
        EXPECT_LT(relative_error(rounds[2].dweight, dw1), kBf16Product);
        EXPECT_LT(relative_error(rounds[2].dbias, db1), kBf16Product);
      }
      {
        // the lm_head at GPT-2's vocabulary (rows of 50,304, a whole number of quads): logits =
        // x @ w^T, the loss, its gradient in place over the logits, then the lm_head's products
        const int N = 64, C = 64, V = 50257, Vp = 50304;
        const Floats x = random_vector<float>(size_t(N) * C, 41),
                     w = random_vector<float>(size_t(Vp) * C, 42);
        std::vector<int32_t> targets(N);
        for (int i = 0; i < N; ++i) targets[i] = (i * 7919) % V;
        auto d_x = to_device(*backend, x), d_w = to_device(*backend, w),
             d_targets = to_device(*backend, targets);
        auto d_logits = to_device(*backend, Floats(size_t(N) * Vp)),
             d_losses = to_device(*backend, Floats(N));
        auto d_dx = to_device(*backend, Floats(x.size())),
             d_dw = to_device(*backend, Floats(w.size()));
        std::vector<RoundResults> rounds;
        Floats first_losses;
        for (int round = 0; round < 3; ++round) {
          backend->matmul_forward(d_logits.as<float>(), d_x.as<float>(), d_w.as<float>(), nullptr,
                                  N, C, Vp);
          const Floats logits = to_host(*backend, d_logits, size_t(N) * Vp);
          backend->cross_entropy_forward(d_losses.as<float>(), d_logits.as<float>(),
                                         d_targets.as<int32_t>(), N, V, Vp);
          const Floats losses = to_host(*backend, d_losses, N);
          if (round == 0) first_losses = losses;
          EXPECT_EQ(losses, first_losses) << "round " << round;
          backend->cross_entropy_backward(d_logits.as<float>(), d_logits.as<float>(),
                                          d_targets.as<int32_t>(), N, V, Vp, 1.0f / N,
                                          ReadBy::kNextProduct);
          RoundResults r;
          r.op_output_fp32 = to_host(*backend, d_logits, size_t(N) * Vp);
          backend->matmul_backward(d_dx.as<float>(), d_dw.as<float>(), nullptr,
                                   d_logits.as<float>(), d_x.as<float>(), d_w.as<float>(), N, C, Vp,
                                   GradientUpdate::kWrite);
          r.dinp = to_host(*backend, d_dx, x.size());
          r.dweight = to_host(*backend, d_dw, w.size());
          if (round == 0 || !alone) {
            EXPECT_NE(r.op_output_fp32, logits) << "round " << round << ": the gradient is written";
          } else {
            EXPECT_EQ(r.op_output_fp32, logits)
                << "round " << round << " wrote fp32 over the logits";
          }
          rounds.push_back(r);
        }
        for (int round = 1; round < 3; ++round) {
          EXPECT_EQ(rounds[round].dinp, rounds[0].dinp) << "round " << round;
          EXPECT_EQ(rounds[round].dweight, rounds[0].dweight) << "round " << round;
        }
      }
    }
}

// ---- attention ----------------------------------------------------------------------------------

struct AttentionCase {
  int B, T, H, hs;
  float p;
};

// What a backend's attention wrote: the output and the gradient of qkv.
struct AttentionResults {
  Floats out, dqkv;
};

AttentionResults check_attention(Backend& backend, const AttentionCase& c, double tolerance,
                                 double gradient_tolerance) {
  SCOPED_TRACE(::testing::Message()
               << "B " << c.B << " T " << c.T << " H " << c.H << " hs " << c.hs << " p " << c.p);
  const int A = c.H * c.hs;
  const DropoutSpec dropout =
      c.p > 0 ? dropout_spec(c.p, 1337, 40, 2, DropoutSite::kAttentionWeights, 3) : no_dropout();
  const Floats qkv = random_vector<float>(size_t(c.B) * c.T * 3 * A, 7, 1.5);
  const Floats dout = random_vector<float>(size_t(c.B) * c.T * A, 8);
  auto d_qkv = to_device(backend, qkv), d_dout = to_device(backend, dout);
  auto d_out = to_device(backend, Floats(size_t(c.B) * c.T * A, NAN));
  auto d_saved =
      to_device(backend, Floats(backend.attention_saved_floats(c.B, c.T, c.H, c.hs), NAN));
  backend.attention_forward(d_out.as<float>(), d_saved.as<float>(), d_qkv.as<float>(), c.B, c.T,
                            c.H, c.hs, 0, dropout);
  Doubles out(size_t(c.B) * c.T * A), probs(size_t(c.B) * c.H * c.T * c.T);
  reference::attention_forward(out.data(), probs.data(), widened(qkv).data(), c.B, c.T, c.H, c.hs,
                               0, dropout);
  AttentionResults results;
  results.out = to_host(backend, d_out, out.size());
  EXPECT_LT(relative_error(results.out, out), tolerance);

  auto d_dqkv = to_device(backend, Floats(qkv.size(), NAN));
  backend.attention_backward(d_dqkv.as<float>(), d_dout.as<float>(), d_qkv.as<float>(),
                             d_saved.as<float>(), c.B, c.T, c.H, c.hs, dropout, ReadBy::kAnyOp);
  Doubles dqkv(qkv.size());
  reference::attention_backward(dqkv.data(), widened(dout).data(), widened(qkv).data(),
                                probs.data(), c.B, c.T, c.H, c.hs, dropout);
  results.dqkv = to_host(backend, d_dqkv, dqkv.size());
  EXPECT_LT(relative_error(results.dqkv, dqkv), gradient_tolerance);
  return results;
}

// FOLIO_GEMM_FALLBACK=1 makes every product take the paths used when cuBLASLt has no algorithm:
// the plain cuBLAS GEMM, and the bias and its gradient in kernels of their own.
TEST_F(CudaOps, MatmulWithoutCublasLt) {
  setenv("FOLIO_GEMM_FALLBACK", "1", 1);
  auto fp32 = cuda_backend("fp32"), bf16 = cuda_backend("bf16");
  auto tf32 = make_backend("cuda", 0, BackendOptions{"fp32", /*tf32=*/true});
  auto unfused = cuda_backend("fp32", /*flash_attention=*/false);  // batched products
  unsetenv("FOLIO_GEMM_FALLBACK");
  check_matmul(*fp32, 64, 48, 40, kFp32Tolerance);
  check_matmul(*fp32, 3, 5, 7, kFp32Tolerance);  // leading dimensions cuBLASLt's loads dislike
  check_matmul(*bf16, 512, 384, 1536, kBf16Product);
  check_matmul(*tf32, 256, 384, 384, 3e-3);  // TF32: a 10-bit mantissa, like bf16's 8 bits
  check_attention(*unfused, {2, 70, 3, 10, 0.2f}, kFp32Tolerance, kFp32Tolerance);
  for (const Backend* backend : {fp32.get(), bf16.get(), tf32.get(), unfused.get()})
    EXPECT_GT(dynamic_cast<const CudaBackend&>(*backend).plain_cublas_products(), 0);
}

TEST_F(CudaOps, FlashAttentionInFp32) {
  auto backend = cuda_backend("fp32");
  check_attention(*backend, {2, 256, 6, 64, 0.2f}, kFp32Tolerance, kFp32Tolerance);  // the seed's
  check_attention(*backend, {1, 130, 2, 100, 0.2f}, kFp32Tolerance, kFp32Tolerance);
  check_attention(*backend, {3, 16, 3, 10, 0.2f}, kFp32Tolerance, kFp32Tolerance);  // tiny's
}

// Which attention kernels a backend ran (CudaBackend counts them): a silent fallback to another
// path must fail the test that means to cover one.
const CudaBackend::AttentionLaunches& launches(const Backend& backend) {
  return dynamic_cast<const CudaBackend&>(backend).attention_launches();
}

// Every head size the tensor cores take, with and without dropout, T not a multiple of the
// kernels' 64 rows, shakespeare_char's shape, a sequence shorter than one tile, and dropout with
// T not a multiple of 4 (a row's dropout words then straddle Philox calls: the register kernels
// read four keys' words from one call only when T is a multiple of 4); how many.
int check_tensor_core_cases(Backend& backend) {
  int cases = 0;
  for (int hs : {16, 32, 64, 128})
    for (float p : {0.0f, 0.2f}) {
      check_attention(backend, {2, 200, 3, hs, p}, kBf16Attention, kBf16AttentionGradient);
      ++cases;
    }
  check_attention(backend, {2, 256, 6, 64, 0.2f}, kBf16Attention, kBf16AttentionGradient);
  check_attention(backend, {1, 7, 2, 64, 0.0f}, kBf16Attention, kBf16AttentionGradient);
  check_attention(backend, {2, 70, 2, 64, 0.2f}, kBf16Attention, kBf16AttentionGradient);
  check_attention(backend, {1, 93, 2, 32, 0.5f}, kBf16Attention, kBf16AttentionGradient);
  return cases + 4;
}

// A bf16 backend whose tensor-core attention runs the kernels with their scores in registers
// (attention_registers.cu; "staged": with their loads staged by cp.async) or the WMMA ones
// (attention_flash_bf16.cu), each side as asked (FOLIO_ATTENTION_FORWARD / _BACKWARD, read when
// a backend is made): every variant is tested whatever the defaults are.
std::unique_ptr<Backend> backend_with_attention_kernels(const char* forward, const char* backward) {
  ::setenv("FOLIO_ATTENTION_FORWARD", forward, 1);
  ::setenv("FOLIO_ATTENTION_BACKWARD", backward, 1);
  auto backend = cuda_backend("bf16");
  ::unsetenv("FOLIO_ATTENTION_FORWARD");
  ::unsetenv("FOLIO_ATTENTION_BACKWARD");
  return backend;
}

// The WMMA kernels both ways.
TEST_F(CudaOps, FlashAttentionOnTensorCores) {
  auto backend = backend_with_attention_kernels("wmma", "wmma");
  const int cases = check_tensor_core_cases(*backend);
  // Every case forward and backward on the tensor cores, none on the fp32 or unfused kernels.
  EXPECT_EQ(launches(*backend).tensor_core_forward, cases);
  EXPECT_EQ(launches(*backend).tensor_core_backward, cases);
  EXPECT_EQ(launches(*backend).register_forward + launches(*backend).register_backward, 0);
  EXPECT_EQ(launches(*backend).staged_forward + launches(*backend).staged_backward, 0);
  EXPECT_EQ(launches(*backend).fp32_flash_forward + launches(*backend).fp32_flash_backward +
                launches(*backend).unfused_forward + launches(*backend).unfused_backward,
            0);
}

// Generation's key/value cache: a forward from q_start leaves the rows before it alone and
// computes the rest as the reference does.
void check_rows_after_q_start(Backend& backend) {
  const int B = 1, T = 200, H = 2, hs = 64, A = H * hs, q_start = 150;
  const Floats qkv = random_vector<float>(size_t(T) * 3 * A, 9);
  Doubles out(size_t(T) * A), probs(size_t(H) * T * T);
  reference::attention_forward(out.data(), probs.data(), widened(qkv).data(), B, T, H, hs, 0,
                               no_dropout());
  Floats start(out.begin(), out.end());
  for (size_t i = size_t(q_start) * A; i < start.size(); ++i) start[i] = NAN;
  auto d_qkv = to_device(backend, qkv), d_out = to_device(backend, start);
  auto d_saved = to_device(backend, Floats(backend.attention_saved_floats(B, T, H, hs), 0.0f));
  backend.attention_forward(d_out.as<float>(), d_saved.as<float>(), d_qkv.as<float>(), B, T, H, hs,
                            q_start, no_dropout());
  const Floats result = to_host(backend, d_out, out.size());
  EXPECT_TRUE(std::equal(result.begin(), result.begin() + size_t(q_start) * A, start.begin()));
  EXPECT_LT(relative_error(result, out), kBf16Attention);
}

// The same cases with the scores in registers, each side alone (the other side's WMMA kernel
// reading what it saved, or saving what it reads) and both.
TEST_F(CudaOps, FlashAttentionForwardInRegisters) {
  auto backend = backend_with_attention_kernels("registers", "wmma");
  const int cases = check_tensor_core_cases(*backend);
  EXPECT_EQ(launches(*backend).register_forward, cases);
  EXPECT_EQ(launches(*backend).tensor_core_forward, cases);
  EXPECT_EQ(launches(*backend).register_backward, 0);
  check_rows_after_q_start(*backend);  // and only the rows from q_start on
}

TEST_F(CudaOps, FlashAttentionBackwardInRegisters) {
  auto backend = backend_with_attention_kernels("wmma", "registers");
  const int cases = check_tensor_core_cases(*backend);
  // every case but head size 128's two (its accumulators would spill: the WMMA kernels take it)
  EXPECT_EQ(launches(*backend).register_backward, cases - 2);
  EXPECT_EQ(launches(*backend).tensor_core_backward, cases);
  EXPECT_EQ(launches(*backend).register_forward, 0);
}

TEST_F(CudaOps, AttentionKernelChoiceRefusesAnUnknownName) {
  ::setenv("FOLIO_ATTENTION_BACKWARD", "regsters", 1);
  try {
    cuda_backend("bf16");
    ADD_FAILURE() << "FOLIO_ATTENTION_BACKWARD=regsters was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "FOLIO_ATTENTION_BACKWARD=regsters: expected registers, staged or wmma"),
              std::string::npos)
        << e.what();
  }
  ::unsetenv("FOLIO_ATTENTION_BACKWARD");
}

TEST_F(CudaOps, FlashAttentionInRegistersBothWays) {
  auto backend = backend_with_attention_kernels("registers", "registers");
  const int cases = check_tensor_core_cases(*backend);
  EXPECT_EQ(launches(*backend).register_forward, cases);
  EXPECT_EQ(launches(*backend).register_backward, cases - 2);
  EXPECT_EQ(launches(*backend).staged_forward + launches(*backend).staged_backward, 0);
}

// The register kernels with their loads staged by cp.async (heads up to 64; 128 loads as
// "registers"), both sides, and each beside the other side's WMMA kernel: the cases include T not
// a multiple of the step (the last staged step's rows past T are zeros) and T below one step.
TEST_F(CudaOps, FlashAttentionInRegistersWithStagedLoads) {
  auto backend = backend_with_attention_kernels("staged", "staged");
  const int cases = check_tensor_core_cases(*backend);
  EXPECT_EQ(launches(*backend).register_forward, cases);
  EXPECT_EQ(launches(*backend).register_backward, cases - 2);
  EXPECT_EQ(launches(*backend).staged_forward, cases - 2);  // all but head size 128's two
  EXPECT_EQ(launches(*backend).staged_backward, cases - 2);
  check_rows_after_q_start(*backend);  // generation's rows from q_start on, staged
  auto forward_only = backend_with_attention_kernels("staged", "wmma");
  check_attention(*forward_only, {2, 70, 2, 64, 0.2f}, kBf16Attention, kBf16AttentionGradient);
  EXPECT_EQ(launches(*forward_only).staged_forward, 1);
  EXPECT_EQ(launches(*forward_only).staged_backward, 0);
  auto backward_only = backend_with_attention_kernels("wmma", "staged");
  check_attention(*backward_only, {2, 70, 2, 64, 0.2f}, kBf16Attention, kBf16AttentionGradient);
  EXPECT_EQ(launches(*backward_only).staged_forward, 0);
  EXPECT_EQ(launches(*backward_only).staged_backward, 1);
}

bool same_bits(const Floats& a, const Floats& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// FOLIO_ATTENTION_FRAGMENTS=ldmatrix: the register kernels, with direct and with staged loads,
// read their products' fragments by ldmatrix. The registers hold what the word loads put there
// (attention_registers.cu proves the lanes' addresses at compile time; this checks that the
// instruction does what that proof assumes), so every output is the same bits as the word
// loads', and as close to the reference.
TEST_F(CudaOps, FlashAttentionFragmentsByLdmatrix) {
  const AttentionCase compared[] = {{2, 256, 6, 64, 0.2f}, {2, 200, 3, 16, 0.2f},
                                    {2, 200, 3, 32, 0.0f}, {1, 130, 2, 128, 0.2f},
                                    {2, 70, 2, 64, 0.2f},  {1, 7, 2, 64, 0.0f}};
  for (const char* loads : {"registers", "staged"}) {
    SCOPED_TRACE(loads);
    auto words = backend_with_attention_kernels(loads, loads);
    ::setenv("FOLIO_ATTENTION_FRAGMENTS", "ldmatrix", 1);
    auto ldmatrix = backend_with_attention_kernels(loads, loads);
    ::unsetenv("FOLIO_ATTENTION_FRAGMENTS");
    const int cases = check_tensor_core_cases(*ldmatrix);
    EXPECT_EQ(launches(*ldmatrix).ldmatrix_forward, cases);
    EXPECT_EQ(launches(*ldmatrix).ldmatrix_backward, cases - 2);  // 128: the WMMA backward
    check_rows_after_q_start(*ldmatrix);
    for (const AttentionCase& c : compared) {
      SCOPED_TRACE(::testing::Message() << "T " << c.T << " hs " << c.hs << " p " << c.p);
      const AttentionResults by_words =
          check_attention(*words, c, kBf16Attention, kBf16AttentionGradient);
      const AttentionResults by_ldmatrix =
          check_attention(*ldmatrix, c, kBf16Attention, kBf16AttentionGradient);
      EXPECT_TRUE(same_bits(by_ldmatrix.out, by_words.out));
      EXPECT_TRUE(same_bits(by_ldmatrix.dqkv, by_words.dqkv));
    }
    EXPECT_EQ(launches(*words).ldmatrix_forward + launches(*words).ldmatrix_backward, 0);
    EXPECT_EQ(launches(*words).register_forward, int(std::size(compared)));
  }
}

// FOLIO_ATTENTION_DROPOUT_MASKS=bits: the register forward kernel keeps the dropout masks of the
// weights as bits, and the register backward kernels read them instead of drawing them again. The
// masks are the ones drawn, so outputs and gradients equal those of the kernels that draw twice
// (values: a weight of zero may differ in the sign of its zero), with direct and with staged
// loads, at T a multiple of 64 and not, and rows past T. Head size 128 keeps none: its backward
// is the WMMA kernels', which draw their own.
TEST_F(CudaOps, AttentionDropoutMasksKeptAsBits) {
  const AttentionCase compared[] = {
      {2, 256, 6, 64, 0.2f}, {2, 200, 3, 16, 0.2f}, {2, 200, 3, 32, 0.5f}, {1, 130, 2, 128, 0.2f},
      {2, 70, 2, 64, 0.2f},  {1, 7, 2, 64, 0.2f},   {2, 33, 2, 32, 0.1f}};
  for (const char* loads : {"registers", "staged"}) {
    SCOPED_TRACE(loads);
    auto drawn = backend_with_attention_kernels(loads, loads);
    std::unique_ptr<Backend> kept;
    {
      ScopedEnvironment bits("FOLIO_ATTENTION_DROPOUT_MASKS", "bits");
      kept = backend_with_attention_kernels(loads, loads);
    }
    // what folio bench and folio train print, so that a log says which masks ran
    EXPECT_NE(kept->description().find("dropout masks kept as bits"), std::string::npos);
    EXPECT_EQ(drawn->description().find("dropout masks kept as bits"), std::string::npos);
    for (const AttentionCase& c : compared) {
      SCOPED_TRACE(::testing::Message() << "T " << c.T << " hs " << c.hs << " p " << c.p);
      const AttentionResults by_drawing =
          check_attention(*drawn, c, kBf16Attention, kBf16AttentionGradient);
      const AttentionResults by_bits =
          check_attention(*kept, c, kBf16Attention, kBf16AttentionGradient);
      EXPECT_EQ(by_bits.out, by_drawing.out);
      EXPECT_EQ(by_bits.dqkv, by_drawing.dqkv);
    }
    const int cases = int(std::size(compared));
    EXPECT_EQ(launches(*kept).mask_bits_kept, cases - 1);  // 128: the WMMA backward draws
    EXPECT_EQ(launches(*kept).mask_bits_recalled, cases - 1);
    EXPECT_EQ(launches(*drawn).mask_bits_kept + launches(*drawn).mask_bits_recalled, 0);
    // Without dropout nothing is kept; a backward pass whose dropout is not the forward's (another
    // step) finds no masks and draws its own.
    check_attention(*kept, {2, 200, 3, 64, 0.0f}, kBf16Attention, kBf16AttentionGradient);
    EXPECT_EQ(launches(*kept).mask_bits_kept, cases - 1);
    const int B = 1, T = 64, H = 2, hs = 64, A = H * hs;
    const Floats qkv = random_vector<float>(size_t(B) * T * 3 * A, 21);
    auto d_qkv = to_device(*kept, qkv), d_dout = to_device(*kept, Floats(size_t(B) * T * A, 0.5f));
    auto d_out = to_device(*kept, Floats(size_t(B) * T * A, NAN));
    auto d_saved = to_device(*kept, Floats(kept->attention_saved_floats(B, T, H, hs), NAN));
    auto d_dqkv = to_device(*kept, Floats(qkv.size(), NAN));
    const DropoutSpec forward_dropout =
        dropout_spec(0.2f, 1337, 40, 2, DropoutSite::kAttentionWeights, 0);
    DropoutSpec backward_dropout = forward_dropout;
    backward_dropout.step = 41;
    kept->attention_forward(d_out.as<float>(), d_saved.as<float>(), d_qkv.as<float>(), B, T, H, hs,
                            0, forward_dropout);
    kept->attention_backward(d_dqkv.as<float>(), d_dout.as<float>(), d_qkv.as<float>(),
                             d_saved.as<float>(), B, T, H, hs, backward_dropout, ReadBy::kAnyOp);
    kept->synchronize();
    EXPECT_EQ(launches(*kept).mask_bits_kept, cases);
    EXPECT_EQ(launches(*kept).mask_bits_recalled, cases - 1);
  }
}

TEST_F(CudaOps, HeadSizesTheTensorCoresTakeNotRunInFp32) {
  auto backend = cuda_backend("bf16");  // head size 10: the fp32 kernels, exact
  check_attention(*backend, {2, 70, 3, 10, 0.2f}, kFp32Tolerance, kFp32Tolerance);
  EXPECT_EQ(launches(*backend).fp32_flash_forward, 1);
  EXPECT_EQ(launches(*backend).fp32_flash_backward, 1);
  EXPECT_EQ(launches(*backend).tensor_core_forward, 0);
}

TEST_F(CudaOps, UnfusedAttention) {
  auto fp32 = cuda_backend("fp32", /*flash_attention=*/false);
  check_attention(*fp32, {2, 70, 3, 10, 0.2f}, kFp32Tolerance, kFp32Tolerance);
  check_attention(*fp32, {2, 256, 6, 64, 0.2f}, kFp32Tolerance, kFp32Tolerance);
  auto bf16 = cuda_backend("bf16", /*flash_attention=*/false);
  check_attention(*bf16, {2, 256, 6, 64, 0.2f}, kBf16Attention, kBf16AttentionGradient);
  auto wide_heads = cuda_backend("fp32");  // above 128 even flash attention falls back to it
  check_attention(*wide_heads, {1, 40, 2, 160, 0.2f}, kFp32Tolerance, kFp32Tolerance);
}

TEST_F(CudaOps, TensorCoreAttentionRecomputesOnlyTheRowsAfterQStart) {
  check_rows_after_q_start(*backend_with_attention_kernels("wmma", "wmma"));  // WMMA's
}

// ---- the fused pairs ----------------------------------------------------------------------------

TEST_F(CudaOps, FusedResidualAddAndLayerNormMatchTheTwoOps) {
  auto backend = cuda_backend("fp32");
  // C = 53 is not a multiple of 4 (partial channel groups, the loop kernels); 384 is
  // shakespeare_char's width (rows in registers, three groups of four a lane).
  for (const auto& [C, p] : {std::pair{53, 0.0f}, {53, 0.2f}, {384, 0.0f}, {384, 0.2f}}) {
    SCOPED_TRACE(C);
    const int B = 3, T = 5, N = B * T;
    const size_t per_sample = size_t(T) * C;
    const DropoutSpec dropout =
        p > 0 ? dropout_spec(p, 99, 4, 1, DropoutSite::kAttentionOutput, 2) : no_dropout();
    const Floats residual = random_vector<float>(N * C, 10),
                 branch = random_vector<float>(N * C, 11), w = random_vector<float>(C, 12),
                 b = random_vector<float>(C, 13);
    auto d_residual = to_device(*backend, residual), d_branch = to_device(*backend, branch);
    auto d_w = to_device(*backend, w), d_b = to_device(*backend, b);
    auto d_sum = to_device(*backend, Floats(N * C, NAN)),
         d_ln = to_device(*backend, Floats(N * C, NAN));
    auto d_mean = to_device(*backend, Floats(N, NAN)), d_rstd = to_device(*backend, Floats(N, NAN));
    backend->dropout_add_layernorm_forward(d_sum.as<float>(), d_ln.as<float>(), d_mean.as<float>(),
                                           d_rstd.as<float>(), d_residual.as<float>(),
                                           d_branch.as<float>(), d_w.as<float>(), d_b.as<float>(),
                                           B, per_sample, C, dropout, ReadBy::kAnyOp);
    Doubles sum(N * C), ln(N * C), mean(N), rstd(N);
    reference::dropout_add_forward(sum.data(), widened(residual).data(), widened(branch).data(), B,
                                   per_sample, dropout);
    reference::layernorm_forward(ln.data(), mean.data(), rstd.data(), sum.data(), widened(w).data(),
                                 widened(b).data(), N, C);
    EXPECT_LT(relative_error(to_host(*backend, d_sum, sum.size()), sum), kFp32Tolerance) << p;
    EXPECT_LT(relative_error(to_host(*backend, d_ln, ln.size()), ln), kFp32Tolerance) << p;
    EXPECT_LT(relative_error(to_host(*backend, d_rstd, N), rstd), kFp32Tolerance) << p;

    const Floats dout = random_vector<float>(N * C, 14), dinp0 = random_vector<float>(N * C, 15);
    auto d_dout = to_device(*backend, dout), d_dinp = to_device(*backend, dinp0);
    auto d_dbranch = to_device(*backend, Floats(N * C, NAN));
    auto d_dw = to_device(*backend, Floats(C, 0.5f)), d_db = to_device(*backend, Floats(C, -0.5f));
    backend->layernorm_dropout_add_backward(d_dinp.as<float>(), d_dbranch.as<float>(),
                                            d_dw.as<float>(), d_db.as<float>(), d_dout.as<float>(),
                                            d_sum.as<float>(), d_w.as<float>(), d_mean.as<float>(),
                                            d_rstd.as<float>(), B, per_sample, C, dropout);
    Doubles dinp = widened(dinp0), dbranch(N * C), dw(C, 0.5), db(C, -0.5);
    reference::layernorm_backward(dinp.data(), dw.data(), db.data(), widened(dout).data(),
                                  sum.data(), widened(w).data(), mean.data(), rstd.data(), N, C);
    reference::dropout_add_backward(dbranch.data(), dinp.data(), B, per_sample, dropout);
    EXPECT_LT(relative_error(to_host(*backend, d_dinp, dinp.size()), dinp), kFp32Tolerance) << p;
    EXPECT_LT(relative_error(to_host(*backend, d_dbranch, dbranch.size()), dbranch), kFp32Tolerance)
        << p;
    EXPECT_LT(relative_error(to_host(*backend, d_dw, C), dw), kFp32Tolerance) << p;
    EXPECT_LT(relative_error(to_host(*backend, d_db, C), db), kFp32Tolerance) << p;
  }
}

TEST_F(CudaOps, LayerNormAtTheModelsWidth) {
  auto backend = cuda_backend("fp32");
  const int N = 4096, C = 384;
  const Floats x = random_vector<float>(size_t(N) * C, 16, 3.0), w = random_vector<float>(C, 17),
               dout = random_vector<float>(size_t(N) * C, 18);
  auto d_x = to_device(*backend, x), d_w = to_device(*backend, w),
       d_dout = to_device(*backend, dout);
  auto d_out = to_device(*backend, Floats(x.size(), NAN)), d_mean = to_device(*backend, Floats(N));
  auto d_rstd = to_device(*backend, Floats(N)), d_dx = to_device(*backend, Floats(x.size(), 0.0f));
  auto d_dw = to_device(*backend, Floats(C, 0.0f));
  backend->layernorm_forward(d_out.as<float>(), d_mean.as<float>(), d_rstd.as<float>(),
                             d_x.as<float>(), d_w.as<float>(), nullptr, N, C, ReadBy::kAnyOp);
  backend->layernorm_backward(d_dx.as<float>(), d_dw.as<float>(), nullptr, d_dout.as<float>(),
                              d_x.as<float>(), d_w.as<float>(), d_mean.as<float>(),
                              d_rstd.as<float>(), N, C);
  Doubles out(x.size()), mean(N), rstd(N), dx(x.size(), 0.0), dw(C, 0.0);
  reference::layernorm_forward(out.data(), mean.data(), rstd.data(), widened(x).data(),
                               widened(w).data(), static_cast<const double*>(nullptr), N, C);
  reference::layernorm_backward(dx.data(), dw.data(), static_cast<double*>(nullptr),
                                widened(dout).data(), widened(x).data(), widened(w).data(),
                                mean.data(), rstd.data(), N, C);
  EXPECT_LT(relative_error(to_host(*backend, d_out, out.size()), out), kFp32Tolerance);
  EXPECT_LT(relative_error(to_host(*backend, d_dx, dx.size()), dx), kFp32Tolerance);
  EXPECT_LT(relative_error(to_host(*backend, d_dw, C), dw), kFp32Tolerance);
}

// The parameter gradients' last sum (LayerNorm's, and biases' without cuBLASLt's epilogue):
// out[j] += the sum of parts partial rows, in a fixed order. Part counts below, at and past the
// kernel's 32 interleaved runs, and column counts below, across and not a multiple of its blocks
// of 32; the same bits on a second run.
TEST_F(CudaOps, PartialSumsAddEveryPartOnce) {
  auto backend = cuda_backend("fp32");
  const auto stream = static_cast<cudaStream_t>(backend->native_stream());
  for (const auto& [parts, cols] :
       {std::pair{1, 1}, {31, 53}, {32, 384}, {33, 384}, {512, 384}, {700, 768}}) {
    SCOPED_TRACE(::testing::Message() << parts << " parts of " << cols << " columns");
    const Floats partials = random_vector<float>(size_t(parts) * cols, 20),
                 start = random_vector<float>(cols, 21);
    auto d_partials = to_device(*backend, partials);
    Doubles expected(start.begin(), start.end());
    for (int p = 0; p < parts; ++p)
      for (int j = 0; j < cols; ++j) expected[j] += partials[size_t(p) * cols + j];
    std::vector<Floats> runs;
    for (int run = 0; run < 2; ++run) {
      auto d_out = to_device(*backend, start);
      cuda::add_partial_sums(d_out.as<float>(), d_partials.as<float>(), parts, cols, stream);
      runs.push_back(to_host(*backend, d_out, cols));
    }
    EXPECT_LT(relative_error(runs[0], expected), kFp32Tolerance);
    EXPECT_EQ(runs[0], runs[1]);
  }
}

// ---- embedding over a full batch, with one token far more common than the rest ------------------

// shakespeare_char's batch, and a batch whose rows end mid-segment (111 = 64 + 47 sorted rows)
// and whose width is not a multiple of the kernel's threads
TEST_F(CudaOps, EmbeddingGradientOfAFullBatch) {
  auto backend = cuda_backend("fp32");
  for (const auto& [V, B, T, C] : {std::array{65, 64, 256, 384}, std::array{65, 3, 37, 40}}) {
    SCOPED_TRACE(::testing::Message() << "B " << B << " T " << T << " C " << C);
    std::vector<int32_t> tokens(size_t(B) * T);
    for (size_t i = 0; i < tokens.size(); ++i) {
      const uint32_t word = RandomStream{5, 0, 0, 0}.word(i);
      tokens[i] = word % 3 == 0 ? 1 : static_cast<int32_t>(word % V);  // a third are token 1
    }
    const Floats dout = random_vector<float>(tokens.size() * C, 19);
    const Floats dwte0 = random_vector<float>(size_t(V) * C, 20),
                 dwpe0 = random_vector<float>(size_t(T) * C, 21);
    auto d_tokens = to_device(*backend, tokens), d_dout = to_device(*backend, dout);
    auto d_dwte = to_device(*backend, dwte0), d_dwpe = to_device(*backend, dwpe0);
    backend->embedding_backward(d_dwte.as<float>(), d_dwpe.as<float>(), d_dout.as<float>(),
                                d_tokens.as<int32_t>(), B, T, C);
    Doubles dwte = widened(dwte0), dwpe = widened(dwpe0);
    reference::embedding_backward(dwte.data(), dwpe.data(), widened(dout).data(), tokens.data(), B,
                                  T, C);
    EXPECT_LT(relative_error(to_host(*backend, d_dwte, dwte.size()), dwte), kFp32Tolerance);
    EXPECT_LT(relative_error(to_host(*backend, d_dwpe, dwpe.size()), dwpe), kFp32Tolerance);
  }
}

// ---- the bf16 copies follow every write ---------------------------------------------------------

// A product of a LayerNorm's output (kept as a bf16 copy once a product has read it) and a weight:
// after each way of changing that output, the product must see the change.
TEST_F(CudaOps, Bf16CopiesOfActivationsFollowEveryWrite) {
  auto backend = cuda_backend("bf16");
  const int N = 256, C = 384, OC = 64;  // N C above the size from which copies are kept
  const Floats w = random_vector<float>(size_t(OC) * C, 22), gamma(C, 1.0f);
  auto d_w = to_device(*backend, w), d_gamma = to_device(*backend, gamma);
  auto d_ln = to_device(*backend, Floats(size_t(N) * C)),
       d_out = to_device(*backend, Floats(size_t(N) * OC));
  auto d_mean = to_device(*backend, Floats(N)), d_rstd = to_device(*backend, Floats(N));
  auto product_of = [&](const Floats& ln_values) {
    backend->matmul_forward(d_out.as<float>(), d_ln.as<float>(), d_w.as<float>(), nullptr, N, C,
                            OC);
    Doubles expected(size_t(N) * OC);
    reference::matmul_forward(expected.data(), widened(ln_values).data(), widened(w).data(),
                              static_cast<const double*>(nullptr), N, C, OC);
    return relative_error(to_host(*backend, d_out, expected.size()), expected);
  };
  auto normalized = [&](uint32_t seed) {  // the producer writes the fp32 values and the copy
    auto d_x = to_device(*backend, random_vector<float>(size_t(N) * C, seed));
    backend->layernorm_forward(d_ln.as<float>(), d_mean.as<float>(), d_rstd.as<float>(),
                               d_x.as<float>(), d_gamma.as<float>(), nullptr, N, C, ReadBy::kAnyOp);
    return to_host(*backend, d_ln, size_t(N) * C);
  };
  EXPECT_LT(product_of(normalized(23)), kBf16Product);  // first read: converted and kept
  EXPECT_LT(product_of(normalized(24)), kBf16Product);  // producer refreshed the copy
  const Floats copied = random_vector<float>(size_t(N) * C, 25);
  backend->copy_to_device(d_ln.get(), copied.data(), copied.size() * sizeof(float));
  EXPECT_LT(product_of(copied), kBf16Product);  // an upload
  backend->fill_zero(d_ln.get(), size_t(N / 2) * C * sizeof(float));
  Floats half = copied;
  std::fill(half.begin(), half.begin() + size_t(N / 2) * C, 0.0f);
  EXPECT_LT(product_of(half), kBf16Product);  // a partial overwrite
}

// The parameters' bf16 mirror after an upload and after AdamW updates them: the product must be
// the one a backend without a mirror computes from the same fp32 weights.
TEST_F(CudaOps, ParameterMirrorFollowsUploadsAndAdamW) {
  auto backend = cuda_backend("bf16"), unmirrored = cuda_backend("bf16");
  const int N = 128, IC = 96, OC = 80;
  const size_t n = size_t(OC) * IC + OC;  // weight, then bias, as in the flat buffer
  const Floats x = random_vector<float>(size_t(N) * IC, 26);
  auto d_params = to_device(*backend, random_vector<float>(n, 27));
  backend->set_parameter_buffer(d_params.as<float>(), n);
  auto d_x = to_device(*backend, x), d_out = to_device(*backend, Floats(size_t(N) * OC));
  auto compare_with_unmirrored = [&] {
    const Floats params = to_host(*backend, d_params, n);
    auto u_params = to_device(*unmirrored, params), u_x = to_device(*unmirrored, x);
    auto u_out = to_device(*unmirrored, Floats(size_t(N) * OC));
    backend->matmul_forward(d_out.as<float>(), d_x.as<float>(), d_params.as<float>(),
                            d_params.as<float>() + size_t(OC) * IC, N, IC, OC);
    unmirrored->matmul_forward(u_out.as<float>(), u_x.as<float>(), u_params.as<float>(),
                               u_params.as<float>() + size_t(OC) * IC, N, IC, OC);
    return relative_error(to_host(*backend, d_out, size_t(N) * OC),
                          to_host(*unmirrored, u_out, size_t(N) * OC));
  };
  EXPECT_LT(compare_with_unmirrored(), 1e-5);
  const Floats uploaded = random_vector<float>(n, 28);
  backend->copy_to_device(d_params.get(), uploaded.data(), n * sizeof(float));
  EXPECT_LT(compare_with_unmirrored(), 1e-5);
  auto d_grads = to_device(*backend, random_vector<float>(n, 29));
  auto d_m = to_device(*backend, Floats(n, 0.0f)), d_v = to_device(*backend, Floats(n, 0.0f));
  for (int step = 1; step <= 2; ++step)
    backend->adamw_update(d_params.as<float>(), d_grads.as<float>(), d_m.as<float>(),
                          d_v.as<float>(), n, AdamWStep{1e-2, 0.9, 0.999, 1e-8, 0.1, step});
  EXPECT_LT(compare_with_unmirrored(), 1e-5);
}

// ---- reductions over a whole gradient -----------------------------------------------------------

// The norm summed on the device, then read by AdamW as its clipping bound (half the norm).
TEST_F(CudaOps, SumOfSquaresAndClippedAdamWOverMillions) {
  auto backend = cuda_backend("fp32");
  const size_t n = 10788929;  // shakespeare_char's parameter count
  const Floats x = random_vector<float>(n, 30, 1e-3);
  auto d_x = to_device(*backend, x), d_result = to_device(*backend, Floats(1, NAN));
  backend->sum_of_squares(d_result.as<float>(), d_x.as<float>(), n);
  const double squares = reference::sum_of_squares(widened(x).data(), n);
  const float device_squares = to_host(*backend, d_result, 1)[0];
  EXPECT_NEAR(device_squares / squares, 1.0, 1e-6);

  const Floats params = random_vector<float>(n, 31);
  auto d_params = to_device(*backend, params);
  auto d_m = to_device(*backend, Floats(n, 0.0f)), d_v = to_device(*backend, Floats(n, 0.0f));
  AdamWStep update{1e-2, 0.9, 0.999, 1e-8, 0.1, 1};
  update.clip_max_norm = 0.5f * std::sqrt(device_squares);
  update.clip_squared_norm = d_result.as<float>();
  backend->adamw_update(d_params.as<float>(), d_x.as<float>(), d_m.as<float>(), d_v.as<float>(), n,
                        update);
  Doubles params_ref = widened(params), m_ref(n, 0.0), v_ref(n, 0.0);
  update.clip_squared_norm = &device_squares;
  reference::adamw_update(params_ref.data(), widened(x).data(), m_ref.data(), v_ref.data(), n,
                          update);
  EXPECT_LT(relative_error(to_host(*backend, d_m, n), m_ref), kFp32Tolerance);
  EXPECT_LT(relative_error(to_host(*backend, d_params, n), params_ref), kFp32Tolerance);
}

}  // namespace
}  // namespace folio
