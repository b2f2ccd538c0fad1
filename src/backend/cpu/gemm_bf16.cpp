// bf16 matrix products on the CPU (--dtype bf16): oneDNN's matmul primitive, or sgemm on the
// operands widened back to fp32 where oneDNN has no bf16 kernel (see gemm.h).
//
// A oneDNN primitive is built for one shape, one layout and one attribute set; building one costs
// far more than a small product, so each is built once and kept, keyed by everything it fixes.
// A training step uses a handful of shapes (about six per layer kind), so the cache stays small.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "backend/cpu/bf16_tiles.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/vector_math.h"

#if defined(FOLIO_BLAS_DNNL)
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace folio::cpu {

namespace {

// The portable path: widen both operands to fp32 (exactly: bf16 is fp32's upper half) and sgemm.
void widened_gemm(bool ta, bool tb, int M, int N, int K, const bf16* A, int lda, const bf16* B,
                  int ldb, bool accumulate, float* C, int ldc, const float* bias, bool relu) {
  thread_local std::vector<float> wide_a, wide_b;
  auto widen = [](std::vector<float>& out, const bf16* x, size_t n) {
    if (out.size() < n) out.resize(n);
    float* o = out.data();
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; ++i) o[i] = from_bf16(x[i]);
  };
  // A row-major rows x cols matrix with leading dimension ld spans (rows - 1) ld + cols numbers.
  auto span = [](int rows, int cols, int ld) { return (rows - 1) * static_cast<size_t>(ld) + cols; };
  widen(wide_a, A, ta ? span(K, M, lda) : span(M, K, lda));
  widen(wide_b, B, tb ? span(N, K, ldb) : span(K, N, ldb));
  if (bias) {  // start from the bias in every row and let the product accumulate onto it
#pragma omp parallel for schedule(static)
    for (int i = 0; i < M; ++i) std::memcpy(C + static_cast<size_t>(i) * ldc, bias, N * sizeof(float));
  }
  sgemm(ta, tb, M, N, K, 1.0f, wide_a.data(), lda, wide_b.data(), ldb,
        accumulate || bias ? 1.0f : 0.0f, C, ldc);
  if (relu) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) C[size_t(i) * ldc + j] = std::max(C[size_t(i) * ldc + j], 0.0f);
  }
}

// Generation's products (one new row a step, or a few) against the weights as they are stored:
// a matrix-vector product is one pass over the weights, which oneDNN's bf16 kernels first copy
// into their own layout, so that `folio sample --dtype bf16` on GPT-2 124M ran no faster than
// fp32 (49 against 54 tokens/s, 2 threads, Zen 4). bf16_tiles.h's rows_times_transposed reads each
// weight row once for all the rows; the threads take blocks of weight rows.
// Where the products are native, vdpbf16ps (bf16_tiles.cpp); on a CPU with AVX2 but no native bf16
// (a Zen 3, or a Zen 4 held to a Zen 3's instructions by FOLIO_CPU_ISA=avx2), the bf16 weights
// widened in registers and multiplied-added in fp32 (bf16_rows_avx2.cpp): either way a token reads
// half the bytes of fp32's weights. The baseline kernels keep the widened sgemm.
// Several texts sampled at once (GPT::forward_next_tokens) give a product a row each: up to
// kMostGenerationRows rows go through the same kernel, kMostVectorRows at a time against each block
// of weight rows while it is in the cache, so the weights are still read from memory once. (At 8
// rows oneDNN took 32 ms a step of GPT-2 124M, copying the weights into its layout each call.)
constexpr int kMostGenerationRows = 4 * tiles::kMostVectorRows;
using RowsKernel = void (*)(int, int, int, int, const bf16*, size_t, const bf16*, size_t, float*,
                            size_t);
RowsKernel few_rows_kernel(bool ta, bool tb, int M) {
  if (ta || !tb || M > kMostGenerationRows) return nullptr;
  if (bf16_is_native() && tiles::engine_runs(tiles::Engine::avx512_bf16))
    return tiles::rows_times_transposed;
  if (chosen_variant() != Variant::baseline) return tiles::rows_times_transposed_avx2;
  return nullptr;
}

// C (fp32, or C16 bf16, M x N) = A W^T, plus C's old values when `accumulate`, plus the bias,
// then ReLU: what the oneDNN path's epilogue does, in the same order.
void vector_product(RowsKernel rows_kernel, int M, int N, int K, const bf16* A, int lda,
                    const bf16* W, int ldw, bool accumulate, float* C, bf16* C16, int ldc,
                    const float* bias, bool relu) {
  constexpr int kWeightRows = 64;  // a block of W: 64 rows of K, 96 KiB at K = 768
  // The caller's buffer: inside the parallel loop `sums` would name each thread's own.
  thread_local std::vector<float> sums;
  sums.resize(static_cast<size_t>(M) * N);
  float* const row_sums = sums.data();
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n += kWeightRows) {
    const int n_end = std::min(N, n + kWeightRows);
    for (int m = 0; m < M; m += tiles::kMostVectorRows)
      rows_kernel(std::min(tiles::kMostVectorRows, M - m), n, n_end, K,
                  A + static_cast<size_t>(m) * lda, lda, W, ldw,
                  row_sums + static_cast<size_t>(m) * N, N);
    for (int m = 0; m < M; ++m)
      for (int j = n; j < n_end; ++j) {
        float value = row_sums[static_cast<size_t>(m) * N + j] + (bias ? bias[j] : 0.0f);
        if (accumulate) value += C[static_cast<size_t>(m) * ldc + j];
        if (relu) value = std::max(value, 0.0f);
        if (C16)
          C16[static_cast<size_t>(m) * ldc + j] = to_bf16(value);
        else
          C[static_cast<size_t>(m) * ldc + j] = value;
      }
  }
}

#if defined(FOLIO_BLAS_DNNL)

struct Engine {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

// Each thread its own engine, stream and primitives: oneDNN's primitives may run on several threads
// at once, but each on the thread that made it (its scratch memory is the thread's), and the shares
// of a batch split across threads (backend.h) run their products side by side.
Engine& engine() {
  thread_local Engine instance;
  return instance;
}

using ProductKey = std::tuple<bool, bool, int, int, int, int, int, int, bool, bool, bool, bool>;

struct Product {
  dnnl::matmul::primitive_desc descriptor;
  dnnl::matmul primitive;
  bool available = false;  // false: oneDNN has no bf16 kernel for this CPU (none before AVX-512)
};

// bf16_out: C is written as bf16, each element rounded from its fp32 sum (bias and ReLU applied).
const Product& product_for(bool ta, bool tb, int M, int N, int K, int lda, int ldb, int ldc,
                           bool accumulate, bool with_bias, bool relu, bool bf16_out) {
  thread_local std::map<ProductKey, Product> cache;
  const ProductKey key{ta, tb, M, N, K, lda, ldb, ldc, accumulate, with_bias, relu, bf16_out};
  if (auto found = cache.find(key); found != cache.end()) return found->second;
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  // Row-major operands; a transposed one is the same memory read with swapped strides.
  const dnnl::memory::desc a({M, K}, dt::bf16, ta ? dims{1, lda} : dims{lda, 1});
  const dnnl::memory::desc b({K, N}, dt::bf16, tb ? dims{1, ldb} : dims{ldb, 1});
  const dnnl::memory::desc c({M, N}, bf16_out ? dt::bf16 : dt::f32, dims{ldc, 1});
  dnnl::primitive_attr attributes;
  dnnl::post_ops post_ops;
  if (accumulate) post_ops.append_sum(1.0f);  // C += A B rather than C = A B
  if (relu) {  // ReLU as the rows are written: no pass over C after it
#if DNNL_VERSION_MAJOR >= 3
    post_ops.append_eltwise(dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
#else
    post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
#endif
  }
  attributes.set_post_ops(post_ops);
  // The bias enters in the kernel's epilogue, as the product's rows are written: no pass
  // filling C with it first and no read of C back (as `accumulate` needs).
  const dnnl::memory::desc bias({1, N}, dt::f32, dims{N, 1});
  Product product;
  try {
    product.descriptor = dnnl::matmul::primitive_desc(
        with_bias ? dnnl::matmul::desc(a, b, bias, c) : dnnl::matmul::desc(a, b, c), attributes,
        engine().engine);
    product.primitive = dnnl::matmul(product.descriptor);
    product.available = true;
  } catch (const dnnl::error&) {
    // unimplemented on this CPU: remembered, and this shape is widened to fp32 from now on
  }
  return cache.emplace(key, std::move(product)).first->second;
}

void run(const Product& product, const bf16* A, const bf16* B, void* C, const float* bias) {
  Engine& e = engine();
  dnnl::memory a(product.descriptor.src_desc(), e.engine, const_cast<bf16*>(A));
  dnnl::memory b(product.descriptor.weights_desc(), e.engine, const_cast<bf16*>(B));
  dnnl::memory c(product.descriptor.dst_desc(), e.engine, C);
  std::unordered_map<int, dnnl::memory> arguments{
      {DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
  if (bias)
    arguments.emplace(DNNL_ARG_BIAS, dnnl::memory(product.descriptor.bias_desc(), e.engine,
                                                  const_cast<float*>(bias)));
  product.primitive.execute(e.stream, arguments);
  e.stream.wait();
}

#endif

}  // namespace

// oneDNN's bf16 kernels run a reduction tens of thousands long against a small output at two
// thirds of their speed: the input gradient of GPT-2's lm_head (1024 x 768, K = 50,304 vocabulary
// columns) took 73-92 ms whole and 48 ms as three products of about 16,768 each, accumulating
// (2 threads, Sapphire Rapids, AMX). Splitting at 16,384 leaves every other product of the presets
// whole (the weight gradients' K = B*T = 16,384 at shakespeare_char), where it measured no gain.
constexpr int kLongestReduction = 16384;

void gemm_bf16(bool ta, bool tb, int M, int N, int K, const bf16* A, int lda, const bf16* B,
               int ldb, bool accumulate, float* C, int ldc, const float* bias, bool relu) {
  if (M == 0 || N == 0) return;
  if (const RowsKernel rows_kernel = few_rows_kernel(ta, tb, M))
    return vector_product(rows_kernel, M, N, K, A, lda, B, ldb, accumulate, C, nullptr, ldc, bias,
                          relu);
  if (K > kLongestReduction) {
    const int parts = (K + kLongestReduction - 1) / kLongestReduction;
    for (int part = 0, k = 0; part < parts; ++part) {
      const int k_end = static_cast<int>(static_cast<int64_t>(K) * (part + 1) / parts);
      // columns k.. of A (rows when transposed), rows k.. of B (columns when transposed)
      const bf16* A_part = ta ? A + static_cast<size_t>(k) * lda : A + k;
      const bf16* B_part = tb ? B + k : B + static_cast<size_t>(k) * ldb;
      gemm_bf16(ta, tb, M, N, k_end - k, A_part, lda, B_part, ldb, accumulate || part > 0, C, ldc,
                part == 0 ? bias : nullptr, relu && part == parts - 1);  // ReLU of the whole sum
      k = k_end;
    }
    return;
  }
#if defined(FOLIO_BLAS_DNNL)
  const Product& product =
      product_for(ta, tb, M, N, K, lda, ldb, ldc, accumulate, bias != nullptr, relu, false);
  if (product.available) return run(product, A, B, C, bias);
#endif
  widened_gemm(ta, tb, M, N, K, A, lda, B, ldb, accumulate, C, ldc, bias, relu);
}

void gemm_bf16_rounded(bool ta, bool tb, int M, int N, int K, const bf16* A, int lda, const bf16* B,
                       int ldb, bf16* C, int ldc, const float* bias, bool relu) {
  if (M == 0 || N == 0) return;
  if (const RowsKernel rows_kernel = few_rows_kernel(ta, tb, M))
    return vector_product(rows_kernel, M, N, K, A, lda, B, ldb, false, nullptr, C, ldc, bias, relu);
#if defined(FOLIO_BLAS_DNNL)
  if (K <= kLongestReduction) {
    const Product& product =
        product_for(ta, tb, M, N, K, lda, ldb, ldc, false, bias != nullptr, relu, true);
    if (product.available) return run(product, A, B, C, bias);
  }
#endif
  // A long reduction (split by gemm_bf16) or no native kernel: fp32 rows, then rounded.
  thread_local std::vector<float> sums;  // the caller's, read through row_sums in the loop
  sums.resize(static_cast<size_t>(M) * N);
  float* const row_sums = sums.data();
  gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, false, row_sums, N, bias, relu);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) C[size_t(i) * ldc + j] = to_bf16(row_sums[size_t(i) * N + j]);
}

bool bf16_is_native() {
#if defined(FOLIO_BLAS_DNNL)
  return dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core_bf16;
#else
  return false;
#endif
}

const char* bf16_kernels() {
#if defined(FOLIO_BLAS_DNNL)
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  if (isa >= dnnl::cpu_isa::avx512_core_amx) return "AMX";
  if (isa >= dnnl::cpu_isa::avx512_core_bf16) return "AVX512-BF16";
  if (isa >= dnnl::cpu_isa::avx512_core) return "emulated by oneDNN on AVX-512";
#endif
  return "widened to fp32";
}

}  // namespace folio::cpu
