#include "backend/cuda/gemm.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.h"

namespace folio::cuda {

namespace {

// The largest power of two up to 256 that divides the address and the batch stride (bytes):
// cuBLASLt assumes 256-byte aligned operands unless told otherwise.
int alignment_of(const void* pointer, int64_t stride_bytes) {
  const uintptr_t bits =
      reinterpret_cast<uintptr_t>(pointer) | static_cast<uintptr_t>(stride_bytes);
  int alignment = 256;
  while (alignment > 1 && bits % alignment != 0) alignment /= 2;
  return alignment;
}

template <typename Value>
void set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                   const Value& value) {
  check_cublas(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)),
               "cublasLtMatmulDescSetAttribute");
}

template <typename Value>
void set_attribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attribute,
                   const Value& value) {
  check_cublas(cublasLtMatrixLayoutSetAttribute(layout, attribute, &value, sizeof(value)),
               "cublasLtMatrixLayoutSetAttribute");
}

template <typename Value>
void set_attribute(cublasLtMatmulPreference_t preference,
                   cublasLtMatmulPreferenceAttributes_t attribute, const Value& value) {
  check_cublas(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value)),
               "cublasLtMatmulPreferenceSetAttribute");
}

}  // namespace

struct Gemm::Plan {
  bool available = false;
  cublasStatus_t heuristic_status = CUBLAS_STATUS_SUCCESS;  // why it is not, when it is not
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

Gemm::Gemm(size_t workspace_bytes) : workspace_(workspace_bytes) {
  check_cublas(cublasLtCreate(&handle_), "cublasLtCreate");
  const char* fallback = std::getenv("FOLIO_GEMM_FALLBACK");
  force_fallback_ = fallback != nullptr && std::strcmp(fallback, "1") == 0;
}

Gemm::~Gemm() {
  plans_.clear();
  if (plain_handle_) cublasDestroy(plain_handle_);
  if (handle_) cublasLtDestroy(handle_);
}

Gemm::Plan& Gemm::plan_for(const PlanKey& key) {
  if (auto cached = plans_.find(key); cached != plans_.end()) return *cached->second;

  auto plan = std::make_unique<Plan>();
  const auto precision = static_cast<GemmPrecision>(key.precision);
  const cublasComputeType_t compute =
      precision == GemmPrecision::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cudaDataType_t operand_type = precision == GemmPrecision::kBf16 ? CUDA_R_16BF : CUDA_R_32F;
  check_cublas(cublasLtMatmulDescCreate(&plan->desc, compute, CUDA_R_32F),
               "cublasLtMatmulDescCreate");
  const cublasOperation_t op_a = key.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = key.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, op_a);
  set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, op_b);
  const auto epilogue = static_cast<cublasLtEpilogue_t>(key.epilogue);
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  if (key.mask_ld != 0) {
    set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, key.mask_ld);
    // as for the bias: a pointer with the real one's alignment (256: a mask is cudaMalloc's)
    set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                  reinterpret_cast<const void*>(uintptr_t(256)));
  }
  if (key.align_bias != 0) {
    // fp32 bias vectors, also beside a bf16 output (cuBLASLt's default there would be bf16: it
    // may refuse, and the caller then does without the epilogue)
    set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_32F);
    // The heuristic reads the bias pointer's alignment from its value: one with the real one's.
    const void* aligned_like_bias = reinterpret_cast<const void*>(uintptr_t(key.align_bias));
    set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, aligned_like_bias);
  }

  // Stored shapes (column-major): A is m x k (k x m when transposed), B is k x n (n x k), D m x n.
  check_cublas(cublasLtMatrixLayoutCreate(&plan->a, operand_type, key.transpose_a ? key.k : key.m,
                                          key.transpose_a ? key.m : key.k, key.lda),
               "cublasLtMatrixLayoutCreate");
  check_cublas(cublasLtMatrixLayoutCreate(&plan->b, operand_type, key.transpose_b ? key.n : key.k,
                                          key.transpose_b ? key.k : key.n, key.ldb),
               "cublasLtMatrixLayoutCreate");
  check_cublas(cublasLtMatrixLayoutCreate(&plan->d, key.out_bf16 ? CUDA_R_16BF : CUDA_R_32F, key.m,
                                          key.n, key.ldd),
               "cublasLtMatrixLayoutCreate");
  if (key.batch > 1) {
    const int32_t batch = key.batch;
    for (auto [layout, stride] :
         {std::pair{plan->a, key.stride_a}, std::pair{plan->b, key.stride_b},
          std::pair{plan->d, key.stride_d}}) {
      set_attribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, batch);
      set_attribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
    }
  }

  cublasLtMatmulPreference_t preference = nullptr;
  check_cublas(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
  const uint64_t workspace_bytes = workspace_.bytes();
  set_attribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace_bytes);
  set_attribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, uint32_t(key.align_a));
  set_attribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, uint32_t(key.align_b));
  set_attribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, uint32_t(key.align_d));
  set_attribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, uint32_t(key.align_d));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle_, plan->desc, plan->a, plan->b, plan->d, plan->d, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  // A refusal is remembered, not thrown: an epilogue cuBLASLt does not offer for these types is
  // done without it, and only a plain product without an algorithm is an error (in run()).
  plan->heuristic_status = status;
  if (status == CUBLAS_STATUS_SUCCESS && found > 0 && !force_fallback_) {
    plan->available = true;
    plan->algo = result.algo;
  }
  return *plans_.emplace(key, std::move(plan)).first->second;
}

bool Gemm::run(const GemmRequest& r, cudaStream_t stream) {
  if (r.M == 0 || r.N == 0 || r.batch == 0) return true;
  if (r.batch > 1 && (r.bias || r.a_row_sums || r.relu || r.out_bf16))
    throw Error("internal: cuBLASLt epilogues are used on single products only");
  if (r.out_bf16 && r.precision != GemmPrecision::kBf16)
    throw Error("internal: a bf16 output needs bf16 operands");
  if ((r.relu || r.relu_gradient) && !r.out_bf16)
    throw Error("internal: ReLU and its gradient ride only with a bf16 output");
  if (r.relu && r.a_row_sums)
    throw Error("internal: no epilogue both applies ReLU and sums a bias gradient");
  if ((r.relu_gradient && (r.relu || r.bias || r.a_row_sums || !r.relu_mask)) ||
      (r.relu_mask &&
       (!(r.relu || r.relu_gradient) || r.relu_mask_ld % 128 != 0 || r.relu_mask_ld < r.N)))
    throw Error("internal: ReLU's mask is written beside ReLU or read by its gradient alone");
  const int64_t element = r.precision == GemmPrecision::kBf16 ? 2 : 4;
  // out^T (N x M) = op(b)^T (N x K) op(a)^T (K x M): cuBLASLt's A is our b, its B our a.
  PlanKey key{};
  key.precision = static_cast<int>(r.precision);
  key.transpose_a = r.b.transposed;
  key.transpose_b = r.a.transposed;
  key.m = r.N;
  key.n = r.M;
  key.k = r.K;
  key.lda = r.b.ld;
  key.ldb = r.a.ld;
  key.ldd = r.ld_out;
  key.batch = r.batch;
  key.stride_a = r.batch > 1 ? r.b.batch_stride : 0;
  key.stride_b = r.batch > 1 ? r.a.batch_stride : 0;
  key.stride_d = r.batch > 1 ? r.out_batch_stride : 0;
  // The bias runs along cuBLASLt's rows (our columns); the row sums of our a are the column sums
  // of its B.
  // ReLU's mask lies along cuBLASLt's output as its output does: a column (our row) of
  // relu_mask_ld bits.
  const cublasLtEpilogue_t relu_epilogue =
      r.relu_mask ? (r.bias ? CUBLASLT_EPILOGUE_RELU_AUX_BIAS : CUBLASLT_EPILOGUE_RELU_AUX)
                  : (r.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU);
  key.epilogue = r.relu            ? relu_epilogue
                 : r.relu_gradient ? CUBLASLT_EPILOGUE_DRELU
                 : r.bias          ? CUBLASLT_EPILOGUE_BIAS
                 : r.a_row_sums    ? CUBLASLT_EPILOGUE_BGRADB
                                   : CUBLASLT_EPILOGUE_DEFAULT;
  key.mask_ld = r.relu_mask ? r.relu_mask_ld : 0;
  key.out_bf16 = r.out_bf16 != nullptr;
  void* out = r.out_bf16 ? r.out_bf16 : static_cast<void*>(r.out);
  key.align_a = alignment_of(r.b.data, key.stride_a * element);
  key.align_b = alignment_of(r.a.data, key.stride_b * element);
  key.align_d = alignment_of(out, key.stride_d * 4);
  const void* epilogue_vector = r.bias ? static_cast<const void*>(r.bias) : r.a_row_sums;
  key.align_bias = epilogue_vector ? alignment_of(epilogue_vector, 0) : 0;

  Plan& plan = plan_for(key);
  if (plan.available) {
    if (epilogue_vector)
      set_attribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, epilogue_vector);
    if (r.relu_mask)
      set_attribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, r.relu_mask);
    const cublasStatus_t status = cublasLtMatmul(
        handle_, plan.desc, &r.alpha, r.b.data, plan.a, r.a.data, plan.b, &r.beta, out, plan.d, out,
        plan.d, &plan.algo, workspace_.get(), workspace_.bytes(), stream);
    if (status == CUBLAS_STATUS_SUCCESS) return true;
    // The heuristic's algorithm refused at run time: never again for this shape. (A bf16 output
    // beside an fp32 bias is a combination cuBLASLt's versions differ on: refused as an invalid
    // value, it is refused too, and the caller computes in fp32 and rounds.)
    const bool refused = status == CUBLAS_STATUS_NOT_SUPPORTED ||
                         (key.out_bf16 && status == CUBLAS_STATUS_INVALID_VALUE);
    if (!refused) check_cublas(status, "cublasLtMatmul");
    plan.available = false;
  }
  // the caller does without the epilogue, or computes in fp32 and rounds
  if (key.epilogue != CUBLASLT_EPILOGUE_DEFAULT || key.out_bf16) return false;
  run_plain_cublas(r, stream);
  return true;
}

// The same product through the plain cuBLAS API, which has an algorithm for every shape and
// alignment: the same column-major reading as above (its A is our b, its B our a).
void Gemm::run_plain_cublas(const GemmRequest& r, cudaStream_t stream) {
  if (plain_handle_ == nullptr) {
    check_cublas(cublasCreate(&plain_handle_), "cublasCreate");
    // Its own workspace would be allocated inside a recorded step: lend it cuBLASLt's (one
    // stream, so the two never use it at once).
    check_cublas(cublasSetWorkspace(plain_handle_, workspace_.get(), workspace_.bytes()),
                 "cublasSetWorkspace");
  }
  check_cublas(cublasSetStream(plain_handle_, stream), "cublasSetStream");
  const cudaDataType_t operand_type = r.precision == GemmPrecision::kBf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      r.precision == GemmPrecision::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  check_cublas(
      cublasGemmStridedBatchedEx(
          plain_handle_, r.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
          r.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N, r.N, r.M, r.K, &r.alpha, r.b.data,
          operand_type, r.b.ld, r.batch > 1 ? r.b.batch_stride : 0, r.a.data, operand_type, r.a.ld,
          r.batch > 1 ? r.a.batch_stride : 0, &r.beta, r.out, CUDA_R_32F, r.ld_out,
          r.batch > 1 ? r.out_batch_stride : 0, r.batch, compute, CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx");
  ++plain_cublas_products_;
}

}  // namespace folio::cuda
