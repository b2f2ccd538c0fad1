// Linear layers on the GPU (reference: backend/reference/matmul.h): cuBLASLt products in bf16
// or fp32 (see cuda_backend.h for the numerics), the bias added in the product's epilogue and
// its gradient taken in the weight-gradient product's epilogue when cuBLASLt offers one for the
// shapes; otherwise by the kernels here. Nothing is saved beyond the inputs the model keeps. An
// output kept as bf16 (ReLU's, FOLIO_CUDA_RELU_OUTPUT=bf16) is written by the product in bf16,
// ReLU after the bias in its epilogue: the same values as the fp32 sum rounded once.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kernel_helpers.cuh"
#include "backend/cuda/shared_kernels.h"

namespace folio {

namespace {

// out[i, j] += bias[j]
__global__ void add_bias_kernel(float* out, const float* bias, int N, int OC) {
  const size_t total = size_t(N) * OC;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] += bias[i % OC];
}

// x[i] += y[i]
__global__ void add_vector_kernel(float* x, const float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += y[i];
}

// out[i] = bf16(x[i]), or bf16(max(x[i], 0)): a product's fp32 output into a tensor kept as bf16
__global__ void round_into_bf16_kernel(cuda::bf16* out, const float* x, size_t n, bool relu) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16(relu ? fmaxf(x[i], 0.0f) : x[i]);
}

}  // namespace

bool CudaBackend::bf16_product(std::initializer_list<int> leading_dimensions) const {
  if (!bf16_) return false;
  for (int ld : leading_dimensions)
    if (ld % 8 != 0) return false;
  return true;
}

cuda::GemmPrecision CudaBackend::precision(bool bf16_operands) const {
  if (bf16_operands) return cuda::GemmPrecision::kBf16;
  return options_.tf32 ? cuda::GemmPrecision::kTf32 : cuda::GemmPrecision::kFloat32;
}

const void* CudaBackend::matmul_operand(const float* x, size_t n, bool is_weight,
                                        bool bf16_operands, Scratch fallback) {
  if (!bf16_operands) return fp32_values(x, n, fallback);
  return is_weight ? static_cast<const void*>(bf16_weight(x, n, fallback))
                   : static_cast<const void*>(bf16_activation(x, n, fallback));
}

int CudaBackend::plain_cublas_products() const {
  return gemm_->plain_cublas_products();
}

bool CudaBackend::try_gemm(const cuda::GemmRequest& request) {
  return gemm_->run(request, stream_);
}

void CudaBackend::run_gemm(const cuda::GemmRequest& request) {
  if (!try_gemm(request)) throw Error("internal: a product without epilogue was refused");
}

void CudaBackend::linear_into_bf16(cuda::bf16* out, const float* inp, const float* weight,
                                   const float* bias, int N, int IC, int OC, bool relu) {
  const size_t n = size_t(N) * OC;
  wrote(out, n * sizeof(cuda::bf16));
  if (bf16_product({IC, OC})) {  // OC: the bf16 output's rows start on 16-byte boundaries
    cuda::GemmRequest product{
        .M = N,
        .N = OC,
        .K = IC,
        .precision = cuda::GemmPrecision::kBf16,
        .a = {bf16_activation(inp, size_t(N) * IC, Scratch::kOperandA), IC},
        .b = {bf16_weight(weight, size_t(OC) * IC, Scratch::kOperandB), IC, true},
        .out_bf16 = out,
        .ld_out = OC,
        .bias = bias,
        .relu = relu};
    // ReLU's mask beside it, for the backward product that applies it (relu_mask_in_products_)
    if (ReluMask* mask = relu ? relu_mask_to_write(out, N, OC) : nullptr) {
      product.relu_mask = mask->bits.get();
      product.relu_mask_ld = mask->ld_bits;
      if (try_gemm(product)) {
        mask->valid = true;
        ++bf16_output_products_.in_epilogue;
        return;
      }
      product.relu_mask = nullptr;  // no algorithm writes the mask: the backward pass runs ReLU's
      product.relu_mask_ld = 0;
    }
    if (try_gemm(product)) {
      ++bf16_output_products_.in_epilogue;
      return;
    }
  }
  // No algorithm for that epilogue and output: the product in fp32, then rounded (and ReLU).
  auto* staged = static_cast<float*>(scratch(Scratch::kProductOutput, n * sizeof(float)));
  matmul_forward(staged, inp, weight, bias, N, IC, OC);
  const unsigned blocks = std::min(cuda::blocks_for(n, cuda::kBlockThreads), 16u * sm_count_);
  round_into_bf16_kernel<<<blocks, cuda::kBlockThreads, 0, stream_>>>(out, staged, n, relu);
  check_launch("round_into_bf16");
  ++bf16_output_products_.rounded_after;
}

void CudaBackend::matmul_activation_forward(float* pre, float* out, const float* inp,
                                            const float* weight, const float* bias, int N, int IC,
                                            int OC, Activation kind, ReadBy out_read_by) {
  const size_t n = size_t(N) * OC;
  cuda::bf16* kept = kept_in_bf16(out, n);
  if (kept != nullptr && kind == Activation::kRelu && pre == out)
    return linear_into_bf16(kept, inp, weight, bias, N, IC, OC, /*relu=*/true);
  if (kept != nullptr || kept_in_bf16(pre, n) != nullptr)
    throw Error(
        "internal: of the feed-forward activations only ReLU's in-place output is kept "
        "as bf16");
  Backend::matmul_activation_forward(pre, out, inp, weight, bias, N, IC, OC, kind, out_read_by);
}

// out (N, OC) = inp (N, IC) @ weight^T + bias
void CudaBackend::matmul_forward(float* out, const float* inp, const float* weight,
                                 const float* bias, int N, int IC, int OC) {
  // (the product alone into ReLU's kept output: the split path of a profiled step)
  if (cuda::bf16* kept = kept_in_bf16(out, size_t(N) * OC))
    return linear_into_bf16(kept, inp, weight, bias, N, IC, OC, /*relu=*/false);
  const bool bf16_operands = bf16_product({IC});
  cuda::GemmRequest product{
      .M = N,
      .N = OC,
      .K = IC,
      .precision = precision(bf16_operands),
      .a = {matmul_operand(inp, size_t(N) * IC, false, bf16_operands, Scratch::kOperandA), IC},
      .b = {matmul_operand(weight, size_t(OC) * IC, true, bf16_operands, Scratch::kOperandB), IC,
            true},
      .out = out,
      .ld_out = OC};
  wrote(out, size_t(N) * OC * sizeof(float));
  if (bias != nullptr && options_.fused_kernels) {
    product.bias = bias;
    if (try_gemm(product)) return;
    product.bias = nullptr;  // no epilogue for these shapes: add it separately
  }
  run_gemm(product);
  if (bias != nullptr) {
    const size_t total = size_t(N) * OC;
    const unsigned blocks = std::min(cuda::blocks_for(total, cuda::kBlockThreads), 16u * sm_count_);
    add_bias_kernel<<<blocks, cuda::kBlockThreads, 0, stream_>>>(out, bias, N, OC);
    check_launch("add_bias");
  }
}

// dinp (N, IC) = dout (N, OC) @ weight; dweight (OC, IC) += dout^T @ inp, dbias += its column
// sums (= for both with GradientUpdate::kWrite)
void CudaBackend::matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const float* inp, const float* weight, int N, int IC, int OC,
                                  GradientUpdate update) {
  const bool bf16_operands = bf16_product({IC, OC});
  const void* dout_operand =
      matmul_operand(dout, size_t(N) * OC, false, bf16_operands, Scratch::kOperandA);
  if (dinp != nullptr) input_gradient_product(dinp, dout_operand, weight, N, IC, OC, bf16_operands);
  weight_gradient_products(dweight, dbias, dout_operand, inp, N, IC, OC, bf16_operands, update);
}

void CudaBackend::input_gradient_product(float* dinp, const void* dout_operand, const float* weight,
                                         int N, int IC, int OC, bool bf16_operands) {
  wrote(dinp, size_t(N) * IC * sizeof(float));
  run_gemm(
      {.M = N,
       .N = IC,
       .K = OC,
       .precision = precision(bf16_operands),
       .a = {dout_operand, OC},
       .b = {matmul_operand(weight, size_t(OC) * IC, true, bf16_operands, Scratch::kOperandB), IC},
       .out = dinp,
       .ld_out = IC});
}

void CudaBackend::weight_gradient_products(float* dweight, float* dbias, const void* dout_operand,
                                           const float* inp, int N, int IC, int OC,
                                           bool bf16_operands, GradientUpdate update) {
  cuda::GemmRequest weight_gradient{
      .M = OC,
      .N = IC,
      .K = N,
      .precision = precision(bf16_operands),
      .a = {dout_operand, OC, true},
      .b = {matmul_operand(inp, size_t(N) * IC, false, bf16_operands, Scratch::kOperandC), IC},
      .out = dweight,
      .ld_out = IC,
      .beta = update == GradientUpdate::kAdd ? 1.0f : 0.0f};  // accumulate, or write
  wrote(dweight, size_t(OC) * IC * sizeof(float));
  if (dbias != nullptr) wrote(dbias, size_t(OC) * sizeof(float));
  // Both ways of summing the bias gradient below add to dbias: written, it starts from zero.
  if (dbias != nullptr && update == GradientUpdate::kWrite) fill_zero(dbias, size_t(OC) * sizeof(float));
  if (dbias != nullptr && options_.fused_kernels) {
    // The epilogue overwrites its vector; the gradient accumulates, so add it in afterwards.
    auto* bias_gradient =
        static_cast<float*>(scratch(Scratch::kBiasGradient, size_t(OC) * sizeof(float)));
    weight_gradient.a_row_sums = bias_gradient;
    if (try_gemm(weight_gradient)) {
      add_vector_kernel<<<cuda::blocks_for(OC, cuda::kBlockThreads), cuda::kBlockThreads, 0,
                          stream_>>>(dbias, bias_gradient, OC);
      check_launch("add_vector");
      return;
    }
    weight_gradient.a_row_sums = nullptr;
  }
  run_gemm(weight_gradient);
  if (dbias != nullptr) {
    // dbias[j] += sum over rows of dout[:, j], in fixed blocks of rows added in order: of the
    // operand the products read, as the epilogue sums it (with bf16 products, the rounded
    // gradient, as PyTorch's bf16 autocast sums it; and dout may hold its bf16 copy alone)
    const int parts = cuda::column_sum_parts(N);
    auto* partials =
        static_cast<float*>(scratch(Scratch::kPartialSums, size_t(parts) * OC * sizeof(float)));
    if (bf16_operands) {
      cuda::column_partial_sums(partials, static_cast<const cuda::bf16*>(dout_operand), N, OC,
                                parts, stream_);
    } else {
      cuda::column_partial_sums(partials, static_cast<const float*>(dout_operand), N, OC, parts,
                                stream_);
    }
    cuda::add_partial_sums(dbias, partials, parts, OC, stream_);
  }
}

// ---- ReLU's backward in fc2's input-gradient product (FOLIO_CUDA_RELU_BACKWARD=epilogue) --------
// ReLU's derivative is 1 or 0, so masking the product's fp32 sums and then rounding them to bf16
// gives what rounding and then masking would: the activation pass's results, with no pass.

void CudaBackend::matmul_backward_into_activation(float* dpre, float* dweight, float* dbias,
                                                  const float* dout, const float* inp,
                                                  const float* weight, const float* pre, int N,
                                                  int IC, int OC, GradientUpdate update,
                                                  Activation kind, ReadBy dpre_read_by) {
  const ReluMask* mask = kind == Activation::kRelu && kept_in_bf16(pre, size_t(N) * IC)
                             ? valid_relu_mask(pre, N, IC)
                             : nullptr;
  const bool bf16_operands = bf16_product({IC, OC});
  if (mask == nullptr || !bf16_operands)
    return Backend::matmul_backward_into_activation(dpre, dweight, dbias, dout, inp, weight, pre, N,
                                                    IC, OC, update, kind, dpre_read_by);
  const void* dout_operand =
      matmul_operand(dout, size_t(N) * OC, false, bf16_operands, Scratch::kOperandA);
  weight_gradient_products(dweight, dbias, dout_operand, inp, N, IC, OC, bf16_operands, update);
  float* dpre_fp32 = dpre;
  cuda::bf16* dpre_bf16 = bf16_output(dpre_fp32, size_t(N) * IC, dpre_read_by);
  if (dpre_bf16 != nullptr && dpre_fp32 == nullptr) {  // its copy alone: the product writes it
    const cuda::GemmRequest product{
        .M = N,
        .N = IC,
        .K = OC,
        .precision = cuda::GemmPrecision::kBf16,
        .a = {dout_operand, OC},
        .b = {matmul_operand(weight, size_t(OC) * IC, true, bf16_operands, Scratch::kOperandB), IC},
        .out_bf16 = dpre_bf16,
        .ld_out = IC,
        .relu_mask = const_cast<void*>(mask->bits.get()),
        .relu_mask_ld = mask->ld_bits,
        .relu_gradient = true};
    if (try_gemm(product)) {
      ++relu_gradients_in_epilogue_;
      return;
    }
  }
  // no algorithm for the epilogue (or the fp32 values are wanted too): the product, then the pass
  input_gradient_product(dpre, dout_operand, weight, N, IC, OC, bf16_operands);
  activation_backward(dpre, dpre, pre, size_t(N) * IC, kind, dpre_read_by);
}

}  // namespace folio
