// Residual branch with dropout on the GPU (reference: backend/reference/dropout_add.h). Each
// thread takes four consecutive elements of a sample: one Philox call gives all four mask words.
// The mask is drawn again in the backward pass rather than stored.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace folio {

namespace {

// Calls visit(index, element, multiplier) for every element of the (B, per_sample) batch, four
// consecutive elements of a sample per thread.
template <typename Visit>
__device__ void for_each_masked(int B, size_t per_sample, const cuda::KernelDropout& dropout,
                                Visit&& visit) {
  const DropoutSpec spec = dropout.resolve();
  const size_t quads_per_sample = (per_sample + 3) / 4;
  const size_t quads = quads_per_sample * B;
  for (size_t quad = blockIdx.x * size_t(blockDim.x) + threadIdx.x; quad < quads;
       quad += size_t(gridDim.x) * blockDim.x) {
    const uint32_t b = static_cast<uint32_t>(quad / quads_per_sample);
    const size_t first = (quad % quads_per_sample) * 4;
    cuda::DropoutCursor mask(spec, b);
    for (size_t e = first; e < first + 4 && e < per_sample; ++e)
      visit(b * per_sample + e, spec.active() ? mask.multiplier(e) : 1.0f);
  }
}

__global__ void dropout_add_forward_kernel(float* out, const float* residual, const float* branch,
                                           int B, size_t per_sample, cuda::KernelDropout dropout) {
  for_each_masked(B, per_sample, dropout, [&](size_t i, float multiplier) {
    out[i] = (residual ? residual[i] : 0.0f) + branch[i] * multiplier;
  });
}

__global__ void dropout_add_backward_kernel(float* dbranch, cuda::bf16* dbranch_bf16,
                                            const float* dout, int B, size_t per_sample,
                                            cuda::KernelDropout dropout) {
  for_each_masked(B, per_sample, dropout, [&](size_t i, float multiplier) {
    const float g = dout[i] * multiplier;
    dbranch[i] = g;
    if (dbranch_bf16) dbranch_bf16[i] = __float2bfloat16(g);
  });
}

unsigned grid_for(int B, size_t per_sample, int sm_count) {
  return std::min(cuda::blocks_for(B * ((per_sample + 3) / 4), cuda::kBlockThreads),
                  16u * sm_count);
}

}  // namespace

void CudaBackend::dropout_add_forward(float* out, const float* residual, const float* branch, int B,
                                      size_t per_sample, const DropoutSpec& dropout) {
  if (B == 0 || per_sample == 0) return;
  wrote(out, B * per_sample * sizeof(float));
  dropout_add_forward_kernel<<<grid_for(B, per_sample, sm_count_), cuda::kBlockThreads, 0,
                               stream_>>>(out, residual, branch, B, per_sample,
                                          cuda::KernelDropout{dropout, live_dropout_step()});
  check_launch("dropout_add_forward");
}

void CudaBackend::dropout_add_backward(float* dbranch, const float* dout, int B, size_t per_sample,
                                       const DropoutSpec& dropout) {
  if (B == 0 || per_sample == 0) return;
  cuda::bf16* dbranch_bf16 = bf16_output(dbranch, B * per_sample);
  dropout_add_backward_kernel<<<grid_for(B, per_sample, sm_count_), cuda::kBlockThreads, 0,
                                stream_>>>(dbranch, dbranch_bf16, dout, B, per_sample,
                                           cuda::KernelDropout{dropout, live_dropout_step()});
  check_launch("dropout_add_backward");
}

}  // namespace folio
