// AdamW (clipping folded in) and reductions on the GPU (reference: backend/reference/optimizer.h).
//
// adamw_update is one kernel over the whole flat parameter buffer (every tensor at once), and it
// writes the parameters' bf16 mirror as it writes the parameters. While a step is recorded for
// replay, it reads the learning rate and step count from the device (LiveStepValues). The sums
// run in double over a fixed grid, and add the blocks' sums in a fixed order: the same bits on
// every run, which clipping (and so bit-identical resume) needs.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace folio {

namespace {

constexpr int kReductionBlocks = 256;  // fixed: the partial sums are then always combined alike

__global__ void adamw_kernel(float* params, cuda::bf16* mirror, const float* grads, float* m,
                             float* v, size_t n, AdamWStep step, const LiveStepValues* live) {
  // The coefficients as the CPU backend computes them: in double, then rounded to float.
  __shared__ float coefficients[4];
  if (threadIdx.x == 0) {
    const double learning_rate = live ? live->learning_rate : step.learning_rate;
    const double t = static_cast<double>(live ? live->adamw_step : step.step);
    coefficients[0] = static_cast<float>(sqrt(1.0 - pow(step.beta2, t)));
    coefficients[1] = static_cast<float>(learning_rate / (1.0 - pow(step.beta1, t)));
    coefficients[2] = static_cast<float>(1.0 - learning_rate * step.weight_decay);
    // Clipping, as the gradients are read (the norm was summed on the device before this).
    coefficients[3] =
        step.clip_squared_norm ? step.clip_coefficient(*step.clip_squared_norm) : 1.0f;
  }
  __syncthreads();
  const float bias_correction2_sqrt = coefficients[0], step_size = coefficients[1],
              decay = coefficients[2], clip = coefficients[3];
  const float beta1 = static_cast<float>(step.beta1), beta2 = static_cast<float>(step.beta2);
  const float one_minus_beta1 = static_cast<float>(1.0 - step.beta1);
  const float one_minus_beta2 = static_cast<float>(1.0 - step.beta2);
  const float eps = static_cast<float>(step.eps);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const float g = grads[i] * clip;
    const float m_i = m[i] * beta1 + g * one_minus_beta1;
    const float v_i = v[i] * beta2 + g * g * one_minus_beta2;
    m[i] = m_i;
    v[i] = v_i;
    const float p =
        params[i] * decay - step_size * m_i / (sqrtf(v_i) / bias_correction2_sqrt + eps);
    params[i] = p;
    if (mirror) mirror[i] = __float2bfloat16(p);
  }
}

template <bool kSquares>
__global__ void partial_sums_kernel(double* partials, const float* x, size_t n) {
  __shared__ double shared[cuda::kWarpSize];
  double total = 0.0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const double value = x[i];
    total += kSquares ? value * value : value;
  }
  total = cuda::block_sum(total, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void finish_sum_kernel(float* result, const double* partials) {
  __shared__ double shared[cuda::kWarpSize];
  const double total = cuda::block_sum(partials[threadIdx.x], shared);
  if (threadIdx.x == 0) *result = static_cast<float>(total);
}

__global__ void scale_kernel(float* x, size_t n, float factor) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    x[i] *= factor;
}

}  // namespace

void CudaBackend::adamw_update(float* params, const float* grads, float* m, float* v, size_t n,
                               const AdamWStep& step) {
  if (n == 0) return;
  cuda::bf16* mirror = bf16_ ? mirror_of(params, n) : nullptr;
  if (mirror == nullptr) wrote(params, n * sizeof(float));  // else the mirror stays in step
  if (mirror && params == mirror_.source && n == mirror_.count) mirror_.stale = false;
  wrote(m, n * sizeof(float));
  wrote(v, n * sizeof(float));
  const unsigned blocks = std::min(cuda::blocks_for(n, cuda::kBlockThreads), 8u * sm_count_);
  adamw_kernel<<<blocks, cuda::kBlockThreads, 0, stream_>>>(params, mirror, grads, m, v, n, step,
                                                            live_step_values());
  check_launch("adamw");
}

namespace {

// *result = the sum of x (or of its squares), through kReductionBlocks partial sums.
template <bool kSquares>
void launch_sum(float* result, const float* x, size_t n, double* partials, cudaStream_t stream) {
  partial_sums_kernel<kSquares>
      <<<kReductionBlocks, cuda::kBlockThreads, 0, stream>>>(partials, x, n);
  finish_sum_kernel<<<1, kReductionBlocks, 0, stream>>>(result, partials);
  check_launch(kSquares ? "sum_of_squares" : "sum");
}

}  // namespace

void CudaBackend::sum(float* result, const float* x, size_t n) {
  wrote(result, sizeof(float));
  launch_sum<false>(
      result, x, n,
      static_cast<double*>(scratch(Scratch::kReduction, kReductionBlocks * sizeof(double))),
      stream_);
}

void CudaBackend::sum_of_squares(float* result, const float* x, size_t n) {
  wrote(result, sizeof(float));
  launch_sum<true>(
      result, x, n,
      static_cast<double*>(scratch(Scratch::kReduction, kReductionBlocks * sizeof(double))),
      stream_);
}

void CudaBackend::scale(float* x, size_t n, float factor) {
  if (n == 0) return;
  wrote(x, n * sizeof(float));
  const unsigned blocks = std::min(cuda::blocks_for(n, cuda::kBlockThreads), 8u * sm_count_);
  scale_kernel<<<blocks, cuda::kBlockThreads, 0, stream_>>>(x, n, factor);
  check_launch("scale");
}

}  // namespace folio
