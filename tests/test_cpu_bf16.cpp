// --dtype bf16 on the CPU (backend/cpu/gemm_bf16.cpp) and the CPU backend's kernel variants
// (backend/cpu/cpu_isa.h).
//
// A bf16 product's exact meaning: operands rounded to bf16 (nearest, ties to even), products summed
// in fp32. So the CPU's bf16 linear layer must agree to fp32 accuracy (1e-5 relative, the op
// table's tolerance) with the double-precision reference run on operands rounded the same way,
// and it must differ from the unrounded reference by about bf16's resolution (2^-9 relative per
// operand: below 1e-2, and above 1e-4, or the operands were never rounded).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "backend/backend.h"
#include "backend/cpu/bf16_tiles.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/vector_math.h"
#include "backend/device_buffer.h"
#include "backend/reference/activation.h"
#include "backend/reference/attention.h"
#include "backend/reference/matmul.h"
#include "core/error.h"
#include "test_helpers.h"

namespace folio {
namespace {

using testing::random_vector;
using testing::relative_error;
using Doubles = std::vector<double>;
using Floats = std::vector<float>;

float from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

// Each value rounded to bf16 (nearest, ties to even).
std::vector<cpu::tiles::bf16> bf16_values(const Floats& values) {
  std::vector<cpu::tiles::bf16> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = cpu::to_bf16(values[i]);
  return out;
}

// Each value rounded to bf16 and widened back, as double.
Doubles rounded(const Floats& values) {
  Doubles out(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    out[i] = from_bits(uint32_t{cpu::to_bf16(values[i])} << 16);
  return out;
}

TEST(Bf16, RoundsToNearestWithTiesToEven) {
  EXPECT_EQ(cpu::to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(cpu::to_bf16(from_bits(0x3F808000u)), 0x3F80);  // tie, lower is even: down
  EXPECT_EQ(cpu::to_bf16(from_bits(0x3F818000u)), 0x3F82);  // tie, upper is even: up
  EXPECT_EQ(cpu::to_bf16(from_bits(0x3F808001u)), 0x3F81);  // above the tie: up
  EXPECT_EQ(cpu::to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(cpu::to_bf16(INFINITY), 0x7F80);
  EXPECT_EQ(cpu::to_bf16(from_bits(0x7F7FFFFFu)), 0x7F80);  // FLT_MAX rounds to infinity
  const uint16_t nan = cpu::to_bf16(from_bits(0x7F800001u));  // a NaN whose payload is low bits
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0) << "a NaN must not become infinity";
}

// The linear layer of N rows, IC inputs and OC outputs, forward and backward, in bf16 and in the
// double reference on the same rounded operands.
void check_bf16_linear_layer(int N, int IC, int OC) {
  SCOPED_TRACE("N " + std::to_string(N) + ", IC " + std::to_string(IC) + ", OC " +
               std::to_string(OC));
  std::unique_ptr<Backend> backend = make_backend("cpu", 0, BackendOptions{"bf16"});
  const Floats inp = random_vector<float>(N * IC, 1), weight = random_vector<float>(OC * IC, 2);
  const Floats bias = random_vector<float>(OC, 3), dout = random_vector<float>(N * OC, 4);
  const Floats dweight0 = random_vector<float>(OC * IC, 5), dbias0 = random_vector<float>(OC, 6);
  auto upload = [&](const Floats& host) {
    DeviceBuffer buffer(*backend, host.size() * sizeof(float));
    backend->copy_to_device(buffer.get(), host.data(), host.size() * sizeof(float));
    return buffer;
  };
  auto download = [&](const DeviceBuffer& buffer, size_t n) {
    Floats host(n);
    backend->copy_to_host(host.data(), buffer.get(), n * sizeof(float));
    return host;
  };
  auto d_inp = upload(inp), d_weight = upload(weight), d_bias = upload(bias);
  auto d_out = upload(Floats(N * OC, NAN)), d_dout = upload(dout), d_dinp = upload(Floats(N * IC, NAN));
  auto d_dweight = upload(dweight0), d_dbias = upload(dbias0);
  backend->matmul_forward(d_out.as<float>(), d_inp.as<float>(), d_weight.as<float>(),
                          d_bias.as<float>(), N, IC, OC);
  backend->matmul_backward(d_dinp.as<float>(), d_dweight.as<float>(), d_dbias.as<float>(),
                           d_dout.as<float>(), d_inp.as<float>(), d_weight.as<float>(), N, IC, OC,
                           GradientUpdate::kAdd);

  const Doubles exact_bias(bias.begin(), bias.end());
  Doubles out(N * OC), out_unrounded(N * OC);
  reference::matmul_forward(out.data(), rounded(inp).data(), rounded(weight).data(),
                            exact_bias.data(), N, IC, OC);
  const Doubles inp_d(inp.begin(), inp.end()), weight_d(weight.begin(), weight.end());
  reference::matmul_forward(out_unrounded.data(), inp_d.data(), weight_d.data(),
                            exact_bias.data(), N, IC, OC);
  Doubles dinp(N * IC), dweight(dweight0.begin(), dweight0.end()), dbias(dbias0.begin(), dbias0.end());
  reference::matmul_backward(dinp.data(), dweight.data(), dbias.data(), rounded(dout).data(),
                             rounded(inp).data(), rounded(weight).data(), N, IC, OC);
  // The bias gradient sums the bf16 copy of the gradient the products read (as PyTorch's autocast
  // and the GPU's fused epilogue do), in fp32: the reference's sum of the rounded gradient, and
  // bf16's resolution away from the sum of the fp32 one.
  Doubles dbias_exact(dbias0.begin(), dbias0.end());
  for (int i = 0; i < N; ++i)
    for (int o = 0; o < OC; ++o) dbias_exact[o] += dout[static_cast<size_t>(i) * OC + o];

  const Floats got = download(d_out, out.size());
  EXPECT_LT(relative_error(got, out), 1e-5);
  EXPECT_LT(relative_error(got, out_unrounded), 1e-2);
  EXPECT_GT(relative_error(got, out_unrounded), 1e-4) << "the operands were not rounded to bf16";
  EXPECT_LT(relative_error(download(d_dinp, dinp.size()), dinp), 1e-5);
  EXPECT_LT(relative_error(download(d_dweight, dweight.size()), dweight), 1e-5);
  const Floats got_dbias = download(d_dbias, dbias.size());
  EXPECT_LT(relative_error(got_dbias, dbias), 1e-6);
  EXPECT_LT(relative_error(got_dbias, dbias_exact), 1e-2);
  EXPECT_GT(relative_error(got_dbias, dbias_exact), 1e-4) << "the gradient was not rounded";

  // The linear layer fused with its nonlinearity: the same product and bias (added by the
  // product itself with bf16 operands, by the activation's pass in fp32), then GELU of it.
  auto d_pre = upload(Floats(N * OC, NAN)), d_act = upload(Floats(N * OC, NAN));
  backend->matmul_activation_forward(d_pre.as<float>(), d_act.as<float>(), d_inp.as<float>(),
                                     d_weight.as<float>(), d_bias.as<float>(), N, IC, OC,
                                     Activation::kGelu, ReadBy::kAnyOp);
  EXPECT_LT(relative_error(download(d_pre, out.size()), out), 1e-5);
  Doubles act(out.size());
  reference::activation_forward(act.data(), out.data(), act.size(), Activation::kGelu);
  EXPECT_LT(relative_error(download(d_act, act.size()), act), 1e-5);
  // ReLU kept in place (pre == out): the product applies it as it writes the rows.
  auto d_relu = upload(Floats(N * OC, NAN));
  backend->matmul_activation_forward(d_relu.as<float>(), d_relu.as<float>(), d_inp.as<float>(),
                                     d_weight.as<float>(), d_bias.as<float>(), N, IC, OC,
                                     Activation::kRelu, ReadBy::kAnyOp);
  reference::activation_forward(act.data(), out.data(), act.size(), Activation::kRelu);
  EXPECT_LT(relative_error(download(d_relu, act.size()), act), 1e-5);
}

TEST(CpuBf16, LinearLayerIsTheProductOfBf16RoundedOperandsSummedInFp32) {
  // Sizes that are not multiples of any vector or tile width, and a K large enough that an fp32
  // sum differs from bf16's.
  check_bf16_linear_layer(37, 150, 29);
}

TEST(CpuBf16, TheFewRowsOfGenerationGiveTheProductOfTheRoundedOperands) {
  // Up to 4 x tiles::kMostVectorRows rows (generation's new rows a step) the forward product runs
  // on rows_times_transposed where the CPU's bf16 is native, on rows_times_transposed_avx2 with
  // the AVX2 kernels (ctest's cpu_kernels_avx2 runs this so), else on the widened sgemm: the
  // bias, the fused GELU, ReLU in place and the backward products around it, with K and N that
  // leave partial steps and blocks; then the rows of several texts sampled at once, up to 16 in
  // pieces of at most 4 (5, 8, 13, 16), and 17, the first beyond the vector path.
  for (int N : {1, 2, 3, 4, 5, 8, 13, 16, 17}) check_bf16_linear_layer(N, 150, 29);
  check_bf16_linear_layer(1, 770, 70);
  check_bf16_linear_layer(7, 770, 70);
}

TEST(CpuBf16, LongReductionsAreSplitWithoutChangingTheProduct) {
  // gemm_bf16 splits a reduction over 16,384 long into parts that accumulate (the lm_head's input
  // gradient over GPT-2's vocabulary): the forward product's K = IC, then the input gradient's K
  // = OC, each into two unequal-looking parts, the bias added once.
  check_bf16_linear_layer(3, 16391, 17);
  check_bf16_linear_layer(3, 17, 16391);
}

// The parameters' bf16 mirror (set_parameter_buffer): products read it instead of rounding the
// weight each time, AdamW writes it as it writes the weights, and any other write makes it out of
// date. Whatever happens to the weights, a product must give the same bits as a backend that
// keeps no mirror and rounds the weight it is handed.
TEST(CpuBf16, ParameterMirrorFollowsEveryWriteToTheWeights) {
  std::unique_ptr<Backend> mirrored = make_backend("cpu", 0, BackendOptions{"bf16"});
  std::unique_ptr<Backend> plain = make_backend("cpu", 0, BackendOptions{"bf16"});
  const int N = 33, IC = 70, OC = 45, lead = 17;  // the weight sits inside the buffer
  const size_t P = lead + static_cast<size_t>(OC) * IC + 9;
  struct Side {
    Backend& backend;
    DeviceBuffer params, grads, m, v, inp, out;
    Side(Backend& b, size_t P, size_t in, size_t out_n)
        : backend(b),
          params(b, P * 4),
          grads(b, P * 4),
          m(b, P * 4),
          v(b, P * 4),
          inp(b, in * 4),
          out(b, out_n * 4) {}
    void put(DeviceBuffer& to, const Floats& host) {
      backend.copy_to_device(to.get(), host.data(), host.size() * sizeof(float));
    }
    Floats product(int N, int IC, int OC, int lead) {
      backend.matmul_forward(out.as<float>(), inp.as<float>(), params.as<float>() + lead, nullptr,
                             N, IC, OC);
      Floats host(static_cast<size_t>(N) * OC);
      backend.copy_to_host(host.data(), out.get(), host.size() * sizeof(float));
      return host;
    }
  };
  Side a(*mirrored, P, size_t(N) * IC, size_t(N) * OC),
      b(*plain, P, size_t(N) * IC, size_t(N) * OC);
  mirrored->set_parameter_buffer(a.params.as<float>(), P);  // `plain` keeps no mirror
  for (Side* side : {&a, &b}) {
    side->put(side->params, random_vector<float>(P, 11));
    side->put(side->grads, random_vector<float>(P, 12, 0.5));
    side->put(side->m, Floats(P, 0.0f));
    side->put(side->v, Floats(P, 0.0f));
    side->put(side->inp, random_vector<float>(size_t(N) * IC, 13));
  }
  auto same_bits = [&](const char* when) {
    const Floats x = a.product(N, IC, OC, lead), y = b.product(N, IC, OC, lead);
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0) << when;
    return x;
  };
  const Floats before = same_bits("first product");
  // Two updates over two ranges (as with weight decay on the matrices only): the second splits
  // the weight, so the mirror must be written part by part. A large learning rate moves every
  // weight by more than bf16's resolution.
  for (int step = 1; step <= 2; ++step) {
    const AdamWStep update{0.05, 0.9, 0.999, 1e-8, 0.1, step};
    const size_t split = step == 1 ? P : lead + 100;
    for (Side* side : {&a, &b}) {
      float* p = side->params.as<float>();
      side->backend.adamw_update(p, side->grads.as<float>(), side->m.as<float>(),
                                 side->v.as<float>(), split, update);
      if (split < P)
        side->backend.adamw_update(p + split, side->grads.as<float>() + split,
                                   side->m.as<float>() + split, side->v.as<float>() + split,
                                   P - split, update);
    }
    EXPECT_NE(same_bits("after AdamW"), before) << "the update did not reach the product";
  }
  for (Side* side : {&a, &b}) side->put(side->params, random_vector<float>(P, 14));
  same_bits("after copy_to_device into the weights");
  for (Side* side : {&a, &b}) side->backend.scale(side->params.as<float>() + lead + 5, 50, -3.0f);
  same_bits("after scale() of part of the weights");
}

// The ops whose output a product reads next write its bf16 copy in the same pass (bf16_output in
// backend/cpu): LayerNorm (alone and after a residual add), the nonlinearity (alone and after
// the fc product), attention, and in the backward pass the nonlinearity's, the residual
// branch's and attention's input gradients and cross-entropy's gradient of the logits. A product
// reading such an output must give the same bits as the same product reading a duplicate of it
// (made by copy_device, so that no op made its copy): rounding before the product is the
// meaning, the writer's copy only saves a pass. A copy serves the one product after its writer;
// a write between the two drops it.
TEST(CpuBf16, CopiesMadeByTheWriterGiveTheProductsOfRoundingBeforeThem) {
  std::unique_ptr<Backend> backend = make_backend("cpu", 0, BackendOptions{"bf16"});
  Backend& be = *backend;
  const int B = 2, T = 37, H = 3, hs = 8, C = 24, F = 4 * C, OC = 29;
  const int N = B * T;
  std::vector<DeviceBuffer> buffers;
  auto buffer = [&](size_t n, uint32_t seed) {
    buffers.emplace_back(be, n * sizeof(float));
    const Floats host = random_vector<float>(n, seed);
    be.copy_to_device(buffers.back().get(), host.data(), n * sizeof(float));
    return buffers.back().as<float>();
  };
  auto download = [&](const float* x, size_t n) {
    Floats host(n);
    be.copy_to_host(host.data(), x, n * sizeof(float));
    return host;
  };
  const size_t widest = size_t(N) * std::max(F, 3 * H * 32);
  float* duplicate = buffer(widest, 1);
  float* y = buffer(size_t(N) * F, 2);
  float* dinp = buffer(widest, 3);
  float* dweight = buffer(size_t(F) * 3 * H * 32, 4);
  float* weight = buffer(size_t(3 * H * 32) * F, 5);
  // The product that reads x (N rows of width) as its input, or as the output gradient of a
  // layer with input `inp` (N, C): its results, downloaded.
  auto product_of_input = [&](const float* x, int width) {
    be.matmul_forward(y, x, weight, nullptr, N, width, OC);
    return download(y, size_t(N) * OC);
  };
  auto product_of_gradient = [&](const float* x, int width, const float* inp) {
    be.matmul_backward(dinp, dweight, nullptr, x, inp, weight, N, C, width,
                       GradientUpdate::kWrite);
    Floats both = download(dinp, size_t(N) * C);
    const Floats dw = download(dweight, size_t(width) * C);
    both.insert(both.end(), dw.begin(), dw.end());
    return both;
  };
  auto same_as_duplicate = [&](const char* op, const float* x, int width, auto product) {
    const Floats got = product(x);  // right after the op that wrote x
    be.copy_device(duplicate, x, size_t(N) * width * sizeof(float));
    const Floats want = product(duplicate);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << op;
  };
  auto as_input = [&](int width) {
    return [&, width](const float* x) { return product_of_input(x, width); };
  };
  float* ln_inp = buffer(size_t(N) * C, 6);
  auto as_gradient = [&](int width) {
    return [&, width](const float* x) { return product_of_gradient(x, width, ln_inp); };
  };
  DropoutSpec dropout = dropout_spec(0.25f, 7, 3, 1, DropoutSite::kAttentionWeights, 0);

  float* ln_out = buffer(size_t(N) * C, 8);
  float* mean = buffer(N, 9);
  float* rstd = buffer(N, 10);
  float* ln_weight = buffer(C, 11);
  float* ln_bias = buffer(C, 12);
  be.layernorm_forward(ln_out, mean, rstd, ln_inp, ln_weight, ln_bias, N, C, ReadBy::kAnyOp);
  same_as_duplicate("layernorm_forward", ln_out, C, as_input(C));

  float* residual = buffer(size_t(N) * C, 13);
  float* branch = buffer(size_t(N) * C, 14);
  float* residual_out = buffer(size_t(N) * C, 15);
  be.dropout_add_layernorm_forward(residual_out, ln_out, mean, rstd, residual, branch, ln_weight,
                                   ln_bias, B, size_t(T) * C, C, dropout, ReadBy::kAnyOp);
  same_as_duplicate("dropout_add_layernorm_forward", ln_out, C, as_input(C));

  float* pre = buffer(size_t(N) * F, 16);
  float* act = buffer(size_t(N) * F, 17);
  float* fc_weight = buffer(size_t(F) * C, 18);
  float* fc_bias = buffer(F, 19);
  for (Activation kind : {Activation::kRelu, Activation::kGelu}) {
    be.matmul_activation_forward(pre, act, ln_inp, fc_weight, fc_bias, N, C, F, kind,
                                 ReadBy::kAnyOp);
    same_as_duplicate("matmul_activation_forward", act, F, as_input(F));
    be.activation_forward(act, pre, size_t(N) * F, kind, ReadBy::kAnyOp);
    same_as_duplicate("activation_forward", act, F, as_input(F));
    float* dact = buffer(size_t(N) * F, 20);
    float* dpre = buffer(size_t(N) * F, 21);
    be.activation_backward(dpre, dact, pre, size_t(N) * F, kind, ReadBy::kAnyOp);
    same_as_duplicate("activation_backward", dpre, F, as_gradient(F));
  }

  // An output that only the next product reads (ReadBy::kNextProduct: GELU's, where the backward
  // pass recomputes it) is written as that product's bf16 operand alone. The product as input
  // (ffwd.net.2's forward) and as the layer input of a weight gradient (its backward) must equal
  // those after a full write, bit for bit, the fp32 tensor must stay as it was (NaN here), and a
  // second product reading it must fail loudly rather than round the NaNs.
  {
    float* only_copy = buffer(size_t(N) * F, 35);
    const Floats nans(size_t(N) * F, NAN);
    float* gradient = buffer(size_t(N) * OC, 36);
    float* act_gradient = buffer(size_t(N) * F, 37);
    auto weight_gradient_of = [&](const float* layer_input) {
      be.matmul_backward(dinp, dweight, nullptr, gradient, layer_input, weight, N, F, OC,
                         GradientUpdate::kWrite);
      return download(dweight, size_t(OC) * F);
    };
    auto unwritten = [&] {
      const Floats now = download(only_copy, nans.size());
      return std::all_of(now.begin(), now.end(), [](float x) { return std::isnan(x); });
    };
    for (Activation kind : {Activation::kGelu, Activation::kGeluTanh}) {
      SCOPED_TRACE(activation_name(kind));
      be.copy_to_device(only_copy, nans.data(), nans.size() * sizeof(float));
      be.matmul_activation_forward(pre, act, ln_inp, fc_weight, fc_bias, N, C, F, kind,
                                   ReadBy::kAnyOp);
      const Floats forward_wanted = product_of_input(act, F);
      be.matmul_activation_forward(pre, only_copy, ln_inp, fc_weight, fc_bias, N, C, F, kind,
                                   ReadBy::kNextProduct);
      const Floats forward_got = product_of_input(only_copy, F);
      EXPECT_EQ(std::memcmp(forward_got.data(), forward_wanted.data(),
                            forward_got.size() * sizeof(float)), 0);
      EXPECT_TRUE(unwritten()) << "matmul_activation_forward wrote the fp32 output";

      be.activation_forward(act, pre, size_t(N) * F, kind, ReadBy::kAnyOp);
      const Floats backward_wanted = weight_gradient_of(act);
      be.activation_forward(only_copy, pre, size_t(N) * F, kind, ReadBy::kNextProduct);
      const Floats backward_got = weight_gradient_of(only_copy);
      EXPECT_EQ(std::memcmp(backward_got.data(), backward_wanted.data(),
                            backward_got.size() * sizeof(float)), 0);
      EXPECT_TRUE(unwritten()) << "activation_forward wrote the fp32 output";
      // GELU's backward: d_fc, read by fc's backward product alone (its output gradient)
      be.activation_backward(act, act_gradient, pre, size_t(N) * F, kind, ReadBy::kAnyOp);
      const Floats gradient_wanted = product_of_gradient(act, F, ln_inp);
      be.copy_to_device(only_copy, nans.data(), nans.size() * sizeof(float));
      be.activation_backward(only_copy, act_gradient, pre, size_t(N) * F, kind,
                             ReadBy::kNextProduct);
      const Floats gradient_got = product_of_gradient(only_copy, F, ln_inp);
      EXPECT_EQ(std::memcmp(gradient_got.data(), gradient_wanted.data(),
                            gradient_got.size() * sizeof(float)), 0);
      EXPECT_TRUE(unwritten()) << "activation_backward wrote the fp32 gradient";
      EXPECT_NE(testing::error_message([&] { product_of_input(only_copy, F); }).find("internal"),
                std::string::npos) << "a second product read the unwritten output";
      // Written in full again, it is an ordinary tensor.
      be.activation_forward(only_copy, pre, size_t(N) * F, kind, ReadBy::kAnyOp);
      product_of_input(only_copy, F);
      EXPECT_NO_THROW(product_of_input(only_copy, F));
    }
    // A pre_norm block's LayerNorm outputs (qkv's and fc's input), alone and fused with the
    // residual add, with a bias and without.
    const Floats row_nans(size_t(N) * C, NAN);
    const float* no_bias = nullptr;
    for (const float* bias : {static_cast<const float*>(ln_bias), no_bias}) {
      SCOPED_TRACE(bias ? "LayerNorm with a bias" : "LayerNorm without a bias");
      be.layernorm_forward(ln_out, mean, rstd, ln_inp, ln_weight, bias, N, C, ReadBy::kAnyOp);
      const Floats alone_wanted = product_of_input(ln_out, C);
      be.copy_to_device(only_copy, row_nans.data(), row_nans.size() * sizeof(float));
      be.layernorm_forward(only_copy, mean, rstd, ln_inp, ln_weight, bias, N, C,
                           ReadBy::kNextProduct);
      const Floats alone_got = product_of_input(only_copy, C);
      EXPECT_EQ(std::memcmp(alone_got.data(), alone_wanted.data(),
                            alone_got.size() * sizeof(float)), 0);
      be.dropout_add_layernorm_forward(residual_out, ln_out, mean, rstd, residual, branch,
                                       ln_weight, bias, B, size_t(T) * C, C, dropout,
                                       ReadBy::kAnyOp);
      const Floats fused_wanted = product_of_input(ln_out, C);
      be.dropout_add_layernorm_forward(residual_out, only_copy, mean, rstd, residual, branch,
                                       ln_weight, bias, B, size_t(T) * C, C, dropout,
                                       ReadBy::kNextProduct);
      const Floats fused_got = product_of_input(only_copy, C);
      EXPECT_EQ(std::memcmp(fused_got.data(), fused_wanted.data(),
                            fused_got.size() * sizeof(float)), 0);
      const Floats now = download(only_copy, row_nans.size());
      EXPECT_TRUE(std::all_of(now.begin(), now.end(), [](float x) { return std::isnan(x); }))
          << "a LayerNorm wrote the fp32 output";
    }
  }

  float* dln = buffer(size_t(N) * C, 22);
  float* dresidual = buffer(size_t(N) * C, 23);
  float* dbranch = buffer(size_t(N) * C, 24);
  float* dln_weight = buffer(C, 25);
  float* dln_bias = buffer(C, 26);
  be.layernorm_dropout_add_backward(dresidual, dbranch, dln_weight, dln_bias, dln, residual_out,
                                    ln_weight, mean, rstd, B, size_t(T) * C, C, dropout);
  same_as_duplicate("layernorm_dropout_add_backward", dbranch, C, as_gradient(C));

  // Heads of 8 take fp32 products; heads of 32 bf16 ones where the CPU has AMX or AVX512-BF16.
  for (int head_size : {hs, 32}) {
    const int width = H * head_size;
    float* qkv = buffer(size_t(N) * 3 * width, 27);
    float* att = buffer(size_t(N) * width, 28);
    float* lse = buffer(be.attention_saved_floats(B, T, H, head_size), 29);
    be.attention_forward(att, lse, qkv, B, T, H, head_size, 0, dropout);
    same_as_duplicate("attention_forward", att, width, as_input(width));
    float* datt = buffer(size_t(N) * width, 30);
    float* dqkv = buffer(size_t(N) * 3 * width, 31);
    be.attention_backward(dqkv, datt, qkv, lse, B, T, H, head_size, dropout, ReadBy::kAnyOp);
    same_as_duplicate("attention_backward", dqkv, 3 * width, as_gradient(3 * width));
    // dqkv read by the qkv layer's products alone (the model's): the same products; with bf16
    // attention the fp32 gradient is never written (NaN-poisoned here), with fp32 attention,
    // which sums dk and dv in place, it is.
    const Floats wanted = product_of_gradient(dqkv, 3 * width, ln_inp);
    const Floats nans(size_t(N) * 3 * width, NAN);
    be.copy_to_device(dqkv, nans.data(), nans.size() * sizeof(float));
    be.attention_backward(dqkv, datt, qkv, lse, B, T, H, head_size, dropout, ReadBy::kNextProduct);
    const Floats got = product_of_gradient(dqkv, 3 * width, ln_inp);
    EXPECT_EQ(std::memcmp(got.data(), wanted.data(), got.size() * sizeof(float)), 0)
        << "heads of " << head_size;
    const Floats fp32 = download(dqkv, nans.size());
    const bool untouched =
        std::all_of(fp32.begin(), fp32.end(), [](float x) { return std::isnan(x); });
    EXPECT_EQ(untouched, be.keeps_as_bf16(ProductOperand::kQkv, head_size))
        << "heads of " << head_size;
  }

  // Cross-entropy's gradient, which the lm_head's gradient products read next.
  {
    const int V = 29, Vp = 32;
    float* logits = buffer(size_t(N) * Vp, 33);
    float* dlogits = buffer(size_t(N) * Vp, 34);
    std::vector<int32_t> targets(N);
    for (int i = 0; i < N; ++i) targets[i] = (i * 7) % V;
    DeviceBuffer d_targets(be, targets.size() * sizeof(int32_t));
    be.copy_to_device(d_targets.get(), targets.data(), targets.size() * sizeof(int32_t));
    be.cross_entropy_backward(dlogits, logits, d_targets.as<int32_t>(), N, V, Vp, 0.25f,
                              ReadBy::kAnyOp);
    same_as_duplicate("cross_entropy_backward", dlogits, Vp, as_gradient(Vp));
  }

  // A write between the writer and the product: through the backend, and straight into memory
  // (CPU memory is host memory) after the copy served its one product.
  be.layernorm_forward(ln_out, mean, rstd, ln_inp, ln_weight, ln_bias, N, C, ReadBy::kAnyOp);
  const Floats other = random_vector<float>(size_t(N) * C, 32);
  be.copy_to_device(ln_out, other.data(), other.size() * sizeof(float));
  same_as_duplicate("copy_to_device after layernorm_forward", ln_out, C, as_input(C));
  be.layernorm_forward(ln_out, mean, rstd, ln_inp, ln_weight, ln_bias, N, C, ReadBy::kAnyOp);
  product_of_input(ln_out, C);
  ln_out[5] += 1.0f;
  same_as_duplicate("a second product after layernorm_forward", ln_out, C, as_input(C));
}

// The engines of attention's bf16 products (backend/cpu/bf16_tiles.h) that this machine runs,
// each with FOLIO_ATTENTION_TILES set to it while a backend is made (the backend reads it once).
// A machine with AMX runs both; a Zen 4 only AVX512-BF16; an AVX2-only CPU neither.
std::vector<cpu::tiles::Engine> engines_here() {
  std::vector<cpu::tiles::Engine> engines;
  for (cpu::tiles::Engine engine : {cpu::tiles::Engine::amx, cpu::tiles::Engine::avx512_bf16})
    if (cpu::tiles::engine_runs(engine)) engines.push_back(engine);
  return engines;
}
const char* engine_key(cpu::tiles::Engine engine) {
  switch (engine) {
    case cpu::tiles::Engine::amx: return "amx";
    case cpu::tiles::Engine::avx512_bf16: return "avx512_bf16";
    case cpu::tiles::Engine::none: break;
  }
  return "none";
}
class ForcedEngine {
 public:
  explicit ForcedEngine(cpu::tiles::Engine engine) {
    setenv("FOLIO_ATTENTION_TILES", engine_key(engine), 1);
  }
  ~ForcedEngine() { unsetenv("FOLIO_ATTENTION_TILES"); }
};

// The products themselves: each engine's C = A B and C += A B over panels packed from a plain
// matrix (and from its transpose) equal the double-precision product of the same bf16-rounded
// operands to fp32 accuracy (1e-5 relative: only the order of the fp32 sums differs), for sizes
// that pad K and N (K 40 -> 64, N 70 -> 96). A wrong pair order, panel stride or row gives
// errors of order 1.
TEST(CpuBf16, EachAttentionEngineMultipliesPackedPanelsExactly) {
  if (engines_here().empty()) GTEST_SKIP() << "this CPU has neither AMX nor AVX512-BF16";
  const int M = 64, K = 40, N = 70, Kp = 64, Np = 96;
  const Floats a = random_vector<float>(size_t(M) * Kp, 51);
  const Floats b = random_vector<float>(size_t(K) * N, 52);
  Floats b_transposed(size_t(N) * K);
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n) b_transposed[size_t(n) * K + k] = b[size_t(k) * N + n];
  std::vector<cpu::tiles::bf16> a16(size_t(M) * Kp, 0);
  for (int m = 0; m < M; ++m)
    for (int k = 0; k < K; ++k) a16[size_t(m) * Kp + k] = cpu::to_bf16(a[size_t(m) * Kp + k]);
  const Doubles a_rounded = rounded(a), b_rounded = rounded(b);
  const Floats start = random_vector<float>(size_t(M) * Np, 53);
  for (cpu::tiles::Engine engine : engines_here()) {
    SCOPED_TRACE(cpu::tiles::engine_name(engine));
    for (bool transposed : {false, true}) {
      const size_t stride = size_t(16) * Kp;
      std::vector<cpu::tiles::bf16> panels(stride * (Np / 16), 0xFFFF);  // NaN unless written
      if (transposed)
        cpu::tiles::pack_panels_transposed(panels.data(), stride, b_transposed.data(), K, K, N,
                                           Kp, Np);
      else
        cpu::tiles::pack_panels(panels.data(), stride, b.data(), N, K, N, Kp, Np);
      for (bool accumulate : {false, true}) {
        SCOPED_TRACE(std::string(transposed ? "transposed" : "plain") +
                     (accumulate ? ", accumulating" : ", writing"));
        Floats c = accumulate ? start : Floats(start.size(), std::nanf(""));
        cpu::tiles::begin_products(engine);
        cpu::tiles::gemm(engine, M, Np, Kp, a16.data(), Kp, panels.data(), stride, c.data(), Np,
                         accumulate);
        cpu::tiles::end_products(engine);
        Doubles want(size_t(M) * Np);
        for (int m = 0; m < M; ++m)
          for (int n = 0; n < Np; ++n) {
            double sum = accumulate ? start[size_t(m) * Np + n] : 0.0;
            for (int k = 0; k < K && n < N; ++k)
              sum += a_rounded[size_t(m) * Kp + k] * b_rounded[size_t(k) * N + n];
            want[size_t(m) * Np + n] = sum;
          }
        EXPECT_LT(relative_error(c, want), 1e-5);
      }
    }
  }
}

// A few-row product's C (M rows of ldc, filled with -7 before the product) against the double
// product of the rounded operands, want(m, n), in columns [n_begin, n_end): equal to fp32
// accuracy there, and -7 elsewhere (nothing written outside the range).
void expect_product_of_rounded(const Floats& c, int M, int ldc, int n_begin, int n_end,
                               const std::function<double(int, int)>& want_at) {
  Floats got, untouched;
  Doubles want;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < ldc; ++n) {
      const float value = c[size_t(m) * ldc + n];
      if (n < n_begin || n >= n_end) {
        untouched.push_back(value);
        continue;
      }
      got.push_back(value);
      want.push_back(want_at(m, n));
    }
  EXPECT_LT(relative_error(got, want), 1e-5);
  EXPECT_TRUE(std::all_of(untouched.begin(), untouched.end(), [](float x) { return x == -7.0f; }));
}

// Generation's matrix-vector products (tiles::rows_times_transposed, and its AVX2 version for CPUs
// without native bf16, each this CPU runs): each of M <= 4 rows of A against the rows
// [n_begin, n_end) of a weight matrix stored N x K, equal to the double product of the same bf16
// operands to fp32 accuracy, for K that ends mid-step (1, 7, 31, 33, 770), ranges that end
// mid-block of 8, 4 and 2, leading dimensions wider than K, and nothing written outside the range.
// A wrong mask, row or lane sum gives errors of order 1.
TEST(CpuBf16, RowsTimesTransposedWeightsEqualTheProductOfTheRoundedOperands) {
  struct Kernel {
    const char* name;
    decltype(&cpu::tiles::rows_times_transposed) multiply;
  };
  std::vector<Kernel> kernels;
  if (cpu::tiles::engine_runs(cpu::tiles::Engine::avx512_bf16))
    kernels.push_back({"AVX512-BF16", cpu::tiles::rows_times_transposed});
  if (cpu::cpu_runs(cpu::Variant::avx2) && cpu::variant_built(cpu::Variant::avx2))
    kernels.push_back({"AVX2", cpu::tiles::rows_times_transposed_avx2});
  if (kernels.empty()) GTEST_SKIP() << "this CPU has neither AVX512-BF16 nor AVX2";
  const int N = 29, n_begin = 2, n_end = 27;
  for (const Kernel& kernel : kernels)
    for (int K : {1, 7, 31, 33, 770})
      for (int M = 1; M <= cpu::tiles::kMostVectorRows; ++M) {
        SCOPED_TRACE(std::string(kernel.name) + ", K " + std::to_string(K) + ", M " +
                     std::to_string(M));
        const int lda = K + 3, ldw = K + 5, ldc = N + 2;
        const Floats a = random_vector<float>(size_t(M) * lda, 61 + K);
        const Floats w = random_vector<float>(size_t(N) * ldw, 62 + K);
        std::vector<cpu::tiles::bf16> a16(a.size()), w16(w.size());
        for (size_t i = 0; i < a.size(); ++i) a16[i] = cpu::to_bf16(a[i]);
        for (size_t i = 0; i < w.size(); ++i) w16[i] = cpu::to_bf16(w[i]);
        const Doubles a_rounded = rounded(a), w_rounded = rounded(w);
        Floats c(size_t(M) * ldc, -7.0f);
        kernel.multiply(M, n_begin, n_end, K, a16.data(), lda, w16.data(), ldw, c.data(), ldc);
        expect_product_of_rounded(c, M, ldc, n_begin, n_end, [&](int m, int n) {
          double sum = 0.0;
          for (int k = 0; k < K; ++k)
            sum += a_rounded[size_t(m) * lda + k] * w_rounded[size_t(n) * ldw + k];
          return sum;
        });
      }
}

// The other product of generation's attention (tiles::rows_times): M <= 4 rows of weights times
// values stored K x N as they are, equal to the double product of the same bf16 operands to fp32
// accuracy, for K odd and even (the last row paired with zeros), N in whole and partial blocks of
// 32 and 64 columns, leading dimensions wider than the rows, and nothing written past column N.
// A wrong pairing or column order after the interleave gives errors of order 1.
TEST(CpuBf16, RowsTimesStoredValuesEqualTheProductOfTheRoundedOperands) {
  if (!cpu::tiles::engine_runs(cpu::tiles::Engine::avx512_bf16))
    GTEST_SKIP() << "this CPU has no AVX512-BF16";
  for (int K : {1, 2, 31, 64, 1001})
    for (int N : {5, 32, 48, 64, 96, 128})
      for (int M = 1; M <= cpu::tiles::kMostVectorRows; ++M) {
        SCOPED_TRACE("K " + std::to_string(K) + ", N " + std::to_string(N) + ", M " +
                     std::to_string(M));
        const int lda = K + 3, ldb = N + 7, ldc = N + 16;
        const Floats a = random_vector<float>(size_t(M) * lda, 63 + K);
        const Floats b = random_vector<float>(size_t(K) * ldb, 64 + N);
        const std::vector<cpu::tiles::bf16> a16 = bf16_values(a), b16 = bf16_values(b);
        const Doubles a_rounded = rounded(a), b_rounded = rounded(b);
        Floats c(size_t(M) * ldc, -7.0f);
        cpu::tiles::rows_times(M, N, K, a16.data(), lda, b16.data(), ldb, c.data(), ldc);
        expect_product_of_rounded(c, M, ldc, 0, N, [&](int m, int n) {
          double sum = 0.0;
          for (int k = 0; k < K; ++k)
            sum += a_rounded[size_t(m) * lda + k] * b_rounded[size_t(k) * ldb + n];
          return sum;
        });
      }
}

// Attention with --dtype bf16 (backend/cpu/attention_tiles.cpp): on a CPU with AMX or
// AVX512-BF16, heads whose size is a multiple of 32 take bf16 products (q k^T, P v and the four
// products of the backward pass), with the softmax, dropout and sums in fp32; each engine this
// machine runs is tested. Against the double-precision reference on the unrounded inputs the
// error is bf16's: each product's operands carry 2^-9 relative rounding, so the results must
// agree below 1e-2 relative (a wrong index, panel or padding gives errors of order 1) and differ
// above 1e-5 (or nothing was rounded). Elsewhere (neither engine, FOLIO_ATTENTION_TILES=none, or
// a forced lesser variant) attention stays fp32 and must equal the reference to 1e-5. The cases
// end strips and key blocks mid-tile (T = 70, 130, 300), fill them (64, 256), hold one row, and
// run heads of 32 and 64 with and without dropout.
void check_bf16_attention(Backend& backend, bool tiles) {
  struct Case {
    int B, T, H, hs;
    float p;
  };
  for (const Case& c : {Case{1, 70, 2, 32, 0.2f}, Case{2, 130, 2, 64, 0.0f},
                        Case{1, 256, 1, 64, 0.2f}, Case{1, 1, 1, 32, 0.0f},
                        Case{2, 64, 3, 32, 0.1f}, Case{1, 300, 1, 64, 0.2f}}) {
    SCOPED_TRACE(::testing::Message() << "B " << c.B << " T " << c.T << " H " << c.H << " hs "
                                      << c.hs << " p " << c.p);
    const int A = c.H * c.hs;
    const size_t n_qkv = size_t(c.B) * c.T * 3 * A, n_out = size_t(c.B) * c.T * A;
    const DropoutSpec dropout =
        c.p > 0 ? dropout_spec(c.p, 1337, 12, 3, DropoutSite::kAttentionWeights, 5) : no_dropout();
    const Floats qkv = random_vector<float>(n_qkv, 41, 1.5), dout = random_vector<float>(n_out, 42);
    DeviceBuffer d_qkv(backend, n_qkv * sizeof(float)), d_dout(backend, n_out * sizeof(float));
    DeviceBuffer d_out(backend, n_out * sizeof(float)), d_dqkv(backend, n_qkv * sizeof(float));
    DeviceBuffer d_lse(backend, backend.attention_saved_floats(c.B, c.T, c.H, c.hs) * 4);
    backend.copy_to_device(d_qkv.get(), qkv.data(), n_qkv * sizeof(float));
    backend.copy_to_device(d_dout.get(), dout.data(), n_out * sizeof(float));
    backend.attention_forward(d_out.as<float>(), d_lse.as<float>(), d_qkv.as<float>(), c.B, c.T,
                              c.H, c.hs, 0, dropout);
    backend.attention_backward(d_dqkv.as<float>(), d_dout.as<float>(), d_qkv.as<float>(),
                               d_lse.as<float>(), c.B, c.T, c.H, c.hs, dropout, ReadBy::kAnyOp);
    Floats out(n_out), dqkv(n_qkv);
    backend.copy_to_host(out.data(), d_out.get(), n_out * sizeof(float));
    backend.copy_to_host(dqkv.data(), d_dqkv.get(), n_qkv * sizeof(float));

    Doubles want_out(n_out), probs(size_t(c.B) * c.H * c.T * c.T), want_dqkv(n_qkv);
    const Doubles qkv_wide(qkv.begin(), qkv.end()), dout_wide(dout.begin(), dout.end());
    reference::attention_forward(want_out.data(), probs.data(), qkv_wide.data(), c.B, c.T, c.H,
                                 c.hs, 0, dropout);
    reference::attention_backward(want_dqkv.data(), dout_wide.data(), qkv_wide.data(),
                                  probs.data(), c.B, c.T, c.H, c.hs, dropout);
    const double out_error = relative_error(out, want_out);
    const double dqkv_error = relative_error(dqkv, want_dqkv);
    if (tiles) {
      EXPECT_LT(out_error, 1e-2);
      EXPECT_LT(dqkv_error, 1e-2);
      if (c.T > 1) {  // one row: its only weight is exactly 1
        EXPECT_GT(out_error, 1e-5) << "the products were not rounded to bf16";
      }
      EXPECT_GT(dqkv_error, 1e-5) << "the products were not rounded to bf16";
    } else {
      EXPECT_LT(out_error, 1e-5);
      EXPECT_LT(dqkv_error, 1e-5);
    }
  }
}

bool describes_bf16_attention(const Backend& backend) {
  return backend.description().find("attention bf16 on") != std::string::npos;
}

TEST(CpuBf16, AttentionWithBf16ProductsAgreesWithTheReferenceToBf16Resolution) {
  {  // as this machine picks by itself
    std::unique_ptr<Backend> backend = make_backend("cpu", 0, BackendOptions{"bf16"});
    const bool tiles = describes_bf16_attention(*backend);
    EXPECT_EQ(tiles, cpu::tiles::chosen_engine() != cpu::tiles::Engine::none &&
                         cpu::chosen_variant() == cpu::Variant::avx512)
        << backend->description();
    check_bf16_attention(*backend, tiles);
  }
  if (cpu::chosen_variant() != cpu::Variant::avx512) return;  // a forced lesser variant: fp32
  for (cpu::tiles::Engine engine : engines_here()) {
    SCOPED_TRACE(cpu::tiles::engine_name(engine));
    ForcedEngine forced(engine);
    std::unique_ptr<Backend> backend = make_backend("cpu", 0, BackendOptions{"bf16"});
    EXPECT_NE(backend->description().find(cpu::tiles::engine_name(engine)), std::string::npos)
        << backend->description();
    check_bf16_attention(*backend, true);
  }
}

// FOLIO_ATTENTION_TILES names an engine, or says why not in one line.
TEST(CpuBf16, AForcedAttentionEngineIsCheckedAndNamed) {
  {
    ForcedEngine forced(cpu::tiles::Engine::none);
    std::unique_ptr<Backend> backend = make_backend("cpu", 0, BackendOptions{"bf16"});
    EXPECT_FALSE(describes_bf16_attention(*backend)) << backend->description();
  }
  setenv("FOLIO_ATTENTION_TILES", "tensor_cores", 1);
  EXPECT_THROW(cpu::tiles::chosen_engine(), Error);
  for (cpu::tiles::Engine engine : {cpu::tiles::Engine::amx, cpu::tiles::Engine::avx512_bf16}) {
    setenv("FOLIO_ATTENTION_TILES", engine_key(engine), 1);
    if (cpu::tiles::engine_runs(engine))
      EXPECT_EQ(cpu::tiles::chosen_engine(), engine);
    else
      EXPECT_THROW(cpu::tiles::chosen_engine(), Error);
  }
  unsetenv("FOLIO_ATTENTION_TILES");
}

// Generation's key/value cache with bf16 products: rows before q_start keep what they hold, the
// rest are computed, here from row 100 of 150 (inside a strip, across a tile's rows).
TEST(CpuBf16, AttentionWithBf16ProductsRecomputesOnlyTheRowsAfterQStart) {
  const int B = 1, T = 150, H = 2, hs = 64, A = H * hs, q_start = 100;
  const Floats qkv = random_vector<float>(size_t(T) * 3 * A, 43);
  Doubles want(size_t(T) * A), probs(size_t(H) * T * T);
  const Doubles qkv_wide(qkv.begin(), qkv.end());
  reference::attention_forward(want.data(), probs.data(), qkv_wide.data(), B, T, H, hs, 0,
                               no_dropout());
  const size_t kept = size_t(q_start) * A;
  Floats start(want.size(), std::nanf(""));
  for (size_t i = 0; i < kept; ++i) start[i] = 1000.0f + static_cast<float>(i);
  std::vector<cpu::tiles::Engine> engines = engines_here();
  engines.push_back(cpu::tiles::Engine::none);
  for (cpu::tiles::Engine engine : engines) {
    SCOPED_TRACE(cpu::tiles::engine_name(engine));
    std::unique_ptr<Backend> backend = [&] {
      ForcedEngine forced(engine);
      return make_backend("cpu", 0, BackendOptions{"bf16"});
    }();
    const bool tiles = describes_bf16_attention(*backend);
    DeviceBuffer d_qkv(*backend, qkv.size() * 4), d_out(*backend, start.size() * 4);
    DeviceBuffer d_lse(*backend, backend->attention_saved_floats(B, T, H, hs) * 4);
    backend->copy_to_device(d_qkv.get(), qkv.data(), qkv.size() * 4);
    backend->copy_to_device(d_out.get(), start.data(), start.size() * 4);
    backend->attention_forward(d_out.as<float>(), d_lse.as<float>(), d_qkv.as<float>(), B, T, H,
                               hs, q_start, no_dropout());
    Floats got(start.size());
    backend->copy_to_host(got.data(), d_out.get(), got.size() * 4);
    EXPECT_EQ(Floats(got.begin(), got.begin() + kept), Floats(start.begin(), start.begin() + kept))
        << "rows before q_start were written";
    const double error = relative_error(Floats(got.begin() + kept, got.end()),
                                        Doubles(want.begin() + kept, want.end()));
    EXPECT_LT(error, tiles ? 1e-2 : 1e-5);
  }
}

// Generation's few new rows (at most tiles::kMostVectorRows after the key/value cache) read the
// cached keys and values where they lie instead of the strips' panels (attention_tiles.cpp,
// FewRows). Their numbers are the strips': the same rounded operands, fp32 softmax and dropout,
// weights rounded before they multiply v; only the order of fp32 sums differs. So the rows equal
// the strips' rows of a whole forward pass to 1e-5 (outputs and log-sum-exps; a wrong key,
// column, or dropout counter gives errors of order 1), agree with the unrounded reference to
// bf16's resolution, leave the rows before q_start alone, and are the same bits whether qkv holds
// fp32 or is kept as bf16 (an inference plan's cache).
TEST(CpuBf16, GenerationsFewRowsReadTheCacheInPlaceAndEqualTheStrips) {
  if (!cpu::tiles::engine_runs(cpu::tiles::Engine::avx512_bf16))
    GTEST_SKIP() << "this CPU has no AVX512-BF16";
  if (cpu::chosen_variant() != cpu::Variant::avx512)
    GTEST_SKIP() << "a forced lesser kernel variant keeps attention's products fp32";
  struct Case {
    int T, hs;
    float p;
  };
  const int B = 2, H = 3;
  for (cpu::tiles::Engine engine : engines_here()) {
    ForcedEngine forced(engine);
    std::unique_ptr<Backend> backend = make_backend("cpu", 0, BackendOptions{"bf16"});
    ASSERT_TRUE(describes_bf16_attention(*backend)) << backend->description();
    for (const Case& c : {Case{1, 32, 0.0f}, Case{3, 64, 0.1f}, Case{37, 32, 0.0f},
                          Case{150, 64, 0.2f}, Case{1001, 64, 0.0f}})
      for (int rows = 1; rows <= std::min(c.T, cpu::tiles::kMostVectorRows); ++rows) {
        SCOPED_TRACE(::testing::Message() << cpu::tiles::engine_name(engine) << ", T " << c.T
                                          << " hs " << c.hs << " p " << c.p << ", rows " << rows);
        const int A = H * c.hs, q_start = c.T - rows;
        const size_t n_qkv = size_t(B) * c.T * 3 * A, n_out = size_t(B) * c.T * A;
        const size_t n_lse = backend->attention_saved_floats(B, c.T, H, c.hs);
        const DropoutSpec dropout =
            c.p > 0 ? dropout_spec(c.p, 1337, 12, 3, DropoutSite::kAttentionWeights, 5)
                    : no_dropout();
        const Floats qkv = random_vector<float>(n_qkv, 44 + c.T, 1.5);
        const std::vector<cpu::tiles::bf16> qkv16 = bf16_values(qkv);
        // Runs the forward pass from q_start on qkv as fp32, or kept as bf16; out and lse start
        // as `start`.
        const auto run = [&](int from, bool kept, const Floats& start, Floats& lse) {
          DeviceBuffer d_qkv(*backend, n_qkv * 4), d_out(*backend, n_out * 4);
          DeviceBuffer d_lse(*backend, n_lse * 4);
          if (kept) {
            backend->store_as_bf16(d_qkv.as<float>(), n_qkv);
            backend->copy_to_device(d_qkv.get(), qkv16.data(), n_qkv * 2);
          } else {
            backend->copy_to_device(d_qkv.get(), qkv.data(), n_qkv * 4);
          }
          backend->copy_to_device(d_out.get(), start.data(), n_out * 4);
          backend->copy_to_device(d_lse.get(), lse.data(), n_lse * 4);
          backend->attention_forward(d_out.as<float>(), d_lse.as<float>(), d_qkv.as<float>(), B,
                                     c.T, H, c.hs, from, dropout);
          Floats out(n_out);
          backend->copy_to_host(out.data(), d_out.get(), n_out * 4);
          backend->copy_to_host(lse.data(), d_lse.get(), n_lse * 4);
          return out;
        };
        Floats start(n_out), lse_start(n_lse);
        for (size_t i = 0; i < n_out; ++i) start[i] = 1000.0f + static_cast<float>(i % 977);
        for (size_t i = 0; i < n_lse; ++i) lse_start[i] = -1000.0f - static_cast<float>(i);
        Floats lse_few = lse_start, lse_kept = lse_start, lse_whole = lse_start;
        const Floats few = run(q_start, false, start, lse_few);
        const Floats kept = run(q_start, true, start, lse_kept);
        const Floats whole = run(0, false, start, lse_whole);
        EXPECT_EQ(few, kept) << "the cache kept as bf16 gave other numbers";
        EXPECT_EQ(lse_few, lse_kept);

        // Split each tensor into the rows before q_start and the new ones.
        Floats old_rows, new_rows, strip_rows, old_lse, new_lse, strip_lse, start_old, start_lse;
        Doubles want_rows;
        Doubles want(n_out), probs(size_t(B) * H * c.T * c.T);
        const Doubles qkv_wide(qkv.begin(), qkv.end());
        reference::attention_forward(want.data(), probs.data(), qkv_wide.data(), B, c.T, H, c.hs, 0,
                                     dropout);
        for (size_t i = 0; i < n_out; ++i) {
          const bool is_new = static_cast<int>(i / A % c.T) >= q_start;
          (is_new ? new_rows : old_rows).push_back(few[i]);
          if (is_new) strip_rows.push_back(whole[i]), want_rows.push_back(want[i]);
          if (!is_new) start_old.push_back(start[i]);
        }
        for (size_t i = 0; i < n_lse; ++i) {  // (pair, row) as in the saved floats
          const bool is_new = static_cast<int>(i % c.T) >= q_start;
          (is_new ? new_lse : old_lse).push_back(lse_few[i]);
          if (is_new) strip_lse.push_back(lse_whole[i]);
          if (!is_new) start_lse.push_back(lse_start[i]);
        }
        EXPECT_EQ(old_rows, start_old) << "rows before q_start were written";
        EXPECT_EQ(old_lse, start_lse) << "log-sum-exps before q_start were written";
        EXPECT_LT(relative_error(new_rows, strip_rows), 1e-5);
        EXPECT_LT(relative_error(new_lse, strip_lse), 1e-6);
        const double error = relative_error(new_rows, want_rows);
        EXPECT_LT(error, 1e-2);
        if (c.T > 1) {
          EXPECT_GT(error, 1e-5) << "the products were not rounded to bf16";
        }
      }
  }
}

TEST(CpuKernels, APickedVariantRunsOnThisCpuAndIsNamedInTheDescription) {
  const cpu::Variant chosen = cpu::chosen_variant();
  EXPECT_TRUE(cpu::cpu_runs(chosen));
  EXPECT_TRUE(cpu::variant_built(chosen));
  const std::string description = make_backend("cpu", 1)->description();
  EXPECT_NE(description.find(std::string(cpu::variant_name(chosen)) + " kernels"),
            std::string::npos)
      << description;
  if (std::getenv("FOLIO_CPU_ISA") == nullptr) {
    // Unforced, the best this binary has and this CPU runs.
    for (cpu::Variant better : {cpu::Variant::avx512, cpu::Variant::avx2}) {
      if (better == chosen) break;
      EXPECT_FALSE(cpu::variant_built(better) && cpu::cpu_runs(better))
          << cpu::variant_name(better) << " was passed over";
    }
  }
}

TEST(CpuKernels, AnUnknownForcedVariantIsRefusedWithTheChoices) {
  const char* previous = std::getenv("FOLIO_CPU_ISA");
  const std::string saved = previous ? previous : "";
  setenv("FOLIO_CPU_ISA", "avx9000", 1);
  const std::string message = testing::error_message([] { make_backend("cpu", 1); });
  if (previous) setenv("FOLIO_CPU_ISA", saved.c_str(), 1); else unsetenv("FOLIO_CPU_ISA");
  EXPECT_NE(message.find("avx512, avx2 or baseline"), std::string::npos) << message;
}

}  // namespace
}  // namespace folio
