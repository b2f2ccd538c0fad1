// Matrix products through cuBLASLt, asked for in row-major terms (as backend/cpu/gemm.h):
//   out (M x N) = alpha * op(a) op(b) + beta * out,   op(a) is M x K, op(b) is K x N,
// optionally a batch of them at fixed strides. Operands are fp32 or bf16; accumulation is fp32,
// and so is the output, except that a product of bf16 operands may write bf16 (out_bf16: a
// tensor kept as bf16 alone). A linear layer's bias, or its gradient, and ReLU after the bias
// (with its mask of kept elements written beside), or ReLU's backward by that mask, can ride in
// the product's epilogue, saving a pass over the output.
//
// cuBLASLt is column-major: the row-major product is asked for as out^T = op(b)^T op(a)^T, which
// is the same memory. The heuristic's choice is cached per shape, type, epilogue and pointer
// alignment, so a shape always runs the same algorithm (same bits) and the host pays for the
// heuristic once.
//
// When cuBLASLt has no algorithm for a product (or refuses one at run time), the plain cuBLAS
// GEMM does it instead; an epilogue it cannot offer, or a bf16 output, is refused (run() returns
// false) and the caller adds the bias, or sums its gradient, in a kernel of its own (or computes
// in fp32 and rounds). FOLIO_GEMM_FALLBACK=1 in
// the environment takes those paths for every product (the GPU tests check them that way).
#pragma once

#include <cublas_v2.h>
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "backend/cuda/cuda_memory.h"

namespace folio::cuda {

enum class GemmPrecision {
  kFloat32,  // fp32 operands on CUDA cores
  kTf32,     // fp32 operands on TF32 tensor cores (10-bit mantissa products)
  kBf16,     // bf16 operands on tensor cores
};

struct GemmOperand {
  const void* data = nullptr;  // fp32, or bf16 when the precision is kBf16
  int ld = 0;                  // elements from one row of the stored matrix to the next
  bool transposed = false;     // op(x) is the transpose of the stored matrix
  int64_t batch_stride = 0;    // elements from one matrix of the batch to the next
};

struct GemmRequest {
  int M = 0, N = 0, K = 0, batch = 1;
  GemmPrecision precision = GemmPrecision::kFloat32;
  GemmOperand a, b;
  float* out = nullptr;
  void* out_bf16 = nullptr;  // instead of out: the output in bf16 (bf16 operands, batch 1)
  int ld_out = 0;
  int64_t out_batch_stride = 0;
  float alpha = 1.0f, beta = 0.0f;
  // Epilogues (batch 1 only):
  const float* bias = nullptr;  // out[i, j] += bias[j]
  float* a_row_sums = nullptr;  // a_row_sums[i] = sum over k of op(a)[i, k]: a bias gradient
  bool relu = false;            // out = max(out, 0), after the bias (with out_bf16 only)
  // ReLU's mask, one bit an output element in cuBLASLt's layout (a row of our output is
  // relu_mask_ld bits, a multiple of 128, from relu_mask). With `relu`: written beside the output
  // (bit set where the output is above zero). With `relu_gradient`: read, and the product's
  // elements where the bit is clear are zeros (ReLU's backward, out = product * mask).
  void* relu_mask = nullptr;
  int64_t relu_mask_ld = 0;
  bool relu_gradient = false;
};

class Gemm {
 public:
  explicit Gemm(size_t workspace_bytes);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Enqueues the product on `stream`. Returns false, having enqueued nothing, when cuBLASLt has
  // no algorithm for the requested epilogue with these shapes and alignments (the caller then
  // does without it); a plain product without one goes to cuBLAS.
  bool run(const GemmRequest& request, cudaStream_t stream);
  // Products cuBLAS did because cuBLASLt had no algorithm for them.
  int plain_cublas_products() const { return plain_cublas_products_; }

 private:
  void run_plain_cublas(const GemmRequest& request, cudaStream_t stream);
  struct Plan;
  struct PlanKey {
    int precision, transpose_a, transpose_b, m, n, k, lda, ldb, ldd, batch, epilogue, out_bf16;
    int64_t stride_a, stride_b, stride_d, mask_ld;
    int align_a, align_b, align_d, align_bias;
    auto operator<=>(const PlanKey&) const = default;
  };
  Plan& plan_for(const PlanKey& key);

  cublasLtHandle_t handle_ = nullptr;
  cublasHandle_t plain_handle_ = nullptr;  // created when first needed
  bool force_fallback_ = false;            // FOLIO_GEMM_FALLBACK=1
  int plain_cublas_products_ = 0;
  DeviceMemory workspace_;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
};

}  // namespace folio::cuda
