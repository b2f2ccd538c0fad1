// --dtype bf16 on the CPU (backend/cpu/gemm_bf16.cpp) and the CPU backend's kernel variants
// (backend/cpu/cpu_isa.h).
//
// A bf16 product's exact meaning: operands rounded to bf16 (nearest, ties to even), products summed
// in fp32. So the CPU's bf16 linear layer must agree to fp32 accuracy (1e-5 relative, the op
// table's tolerance) with the double-precision reference run on operands rounded the same way,
// and it must differ from the unrounded reference by about bf16's resolution (2^-9 relative per
// operand: below 1e-2, and above 1e-4, or the operands were never rounded).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backend/backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/vector_math.h"
#include "backend/device_buffer.h"
#include "backend/reference/matmul.h"
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

TEST(CpuBf16, LinearLayerIsTheProductOfBf16RoundedOperandsSummedInFp32) {
  std::unique_ptr<Backend> backend = make_backend("cpu", 0, BackendOptions{"bf16"});
  // Sizes that are not multiples of any vector or tile width, and a K large enough that an fp32
  // sum differs from bf16's.
  const int N = 37, IC = 150, OC = 29;
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
                           d_dout.as<float>(), d_inp.as<float>(), d_weight.as<float>(), N, IC, OC);

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
  // The bias gradient sums the fp32 gradient, not its bf16 copy.
  Doubles dbias_exact(dbias0.begin(), dbias0.end());
  for (int i = 0; i < N; ++i)
    for (int o = 0; o < OC; ++o) dbias_exact[o] += dout[static_cast<size_t>(i) * OC + o];

  const Floats got = download(d_out, out.size());
  EXPECT_LT(relative_error(got, out), 1e-5);
  EXPECT_LT(relative_error(got, out_unrounded), 1e-2);
  EXPECT_GT(relative_error(got, out_unrounded), 1e-4) << "the operands were not rounded to bf16";
  EXPECT_LT(relative_error(download(d_dinp, dinp.size()), dinp), 1e-5);
  EXPECT_LT(relative_error(download(d_dweight, dweight.size()), dweight), 1e-5);
  EXPECT_LT(relative_error(download(d_dbias, dbias.size()), dbias_exact), 1e-6);
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
        : backend(b), params(b, P * 4), grads(b, P * 4), m(b, P * 4), v(b, P * 4),
          inp(b, in * 4), out(b, out_n * 4) {}
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
  Side a(*mirrored, P, size_t(N) * IC, size_t(N) * OC), b(*plain, P, size_t(N) * IC, size_t(N) * OC);
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
