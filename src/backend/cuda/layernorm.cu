// LayerNorm on the GPU (reference: backend/reference/layernorm.h), and its fusion with the
// residual add before it: one warp per row. Saves mean and rstd per row for the backward pass.
//
// Lanes visit a row in groups of four consecutive channels (lane l takes channels 4l..4l+3, then
// 4(l + warp)..., and so on): a warp reads whole cache lines, and each group of four elements of
// a dropout mask is one Philox call. The same lane owns the same channels in every pass, which
// is what makes the per-block parameter-gradient sums in the backward pass race-free.
#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernel_helpers.cuh"
#include "backend/cuda/shared_kernels.h"

namespace folio {

namespace {

using cuda::bf16;
using cuda::kWarpSize;

constexpr float kEps = 1e-5f;
constexpr int kRowsPerBlock = cuda::kBlockThreads / kWarpSize;  // forward: one row per warp

// y = (x - mean) * rstd * weight + bias over one row of C; writes mean and rstd (lane 0).
__device__ void normalize_row(float* out, bf16* out_bf16, float* mean_out, float* rstd_out,
                              const float* x, const float* weight, const float* bias, int C,
                              int lane) {
  float sum = 0.0f;
  for (int c0 = 4 * lane; c0 < C; c0 += 4 * kWarpSize)
    for (int c = c0; c < min(c0 + 4, C); ++c) sum += x[c];
  const float mean = cuda::warp_sum(sum) / C;
  float squares = 0.0f;
  for (int c0 = 4 * lane; c0 < C; c0 += 4 * kWarpSize)
    for (int c = c0; c < min(c0 + 4, C); ++c) {
      const float d = x[c] - mean;
      squares += d * d;
    }
  const float rstd = 1.0f / sqrtf(cuda::warp_sum(squares) / C + kEps);
  for (int c0 = 4 * lane; c0 < C; c0 += 4 * kWarpSize)
    for (int c = c0; c < min(c0 + 4, C); ++c) {
      const float y = (x[c] - mean) * rstd * weight[c] + (bias ? bias[c] : 0.0f);
      out[c] = y;
      if (out_bf16) out_bf16[c] = __float2bfloat16(y);
    }
  if (lane == 0) {
    *mean_out = mean;
    *rstd_out = rstd;
  }
}

__global__ void layernorm_forward_kernel(float* out, bf16* out_bf16, float* mean, float* rstd,
                                         const float* inp, const float* weight, const float* bias,
                                         int N, int C) {
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= N) return;
  const size_t offset = size_t(row) * C;
  normalize_row(out + offset, out_bf16 ? out_bf16 + offset : nullptr, mean + row, rstd + row,
                inp + offset, weight, bias, C, threadIdx.x % kWarpSize);
}

// residual_out = residual + dropout(branch), then LayerNorm of it, reading the row back while it
// is still in cache rather than in a second kernel.
__global__ void dropout_add_layernorm_forward_kernel(float* residual_out, float* ln_out,
                                                     bf16* ln_bf16, float* mean, float* rstd,
                                                     const float* residual, const float* branch,
                                                     const float* weight, const float* bias, int N,
                                                     int C, int rows_per_sample,
                                                     cuda::KernelDropout dropout) {
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const size_t offset = size_t(row) * C;
  const DropoutSpec spec = dropout.resolve();
  cuda::DropoutCursor mask(spec, static_cast<uint32_t>(row / rows_per_sample));
  const uint64_t first_element = uint64_t(row % rows_per_sample) * C;  // within the sample
  float* x = residual_out + offset;
  for (int c0 = 4 * lane; c0 < C; c0 += 4 * kWarpSize)
    for (int c = c0; c < min(c0 + 4, C); ++c) {
      float value = branch[offset + c];
      if (spec.active()) value *= mask.multiplier(first_element + c);
      x[c] = residual[offset + c] + value;
    }
  __syncwarp();  // the row's other lanes' writes are visible from here on
  normalize_row(ln_out + offset, ln_bf16 ? ln_bf16 + offset : nullptr, mean + row, rstd + row, x,
                weight, bias, C, lane);
}

// With n = (x - mean) * rstd and g = dout * weight:
//   dinp += rstd * (g - mean(g) - n * mean(g * n))
// and, fused (kDropoutAdd), dbranch = dropout(the updated dinp). Parameter gradients: each warp
// sums its rows into its own shared-memory rows (a channel only ever touched by its owning
// lane), the block adds its warps in order into one partial row per block, and
// add_partial_sums() adds the blocks in order.
template <bool kDropoutAdd>
__global__ void layernorm_backward_kernel(float* dinp, float* dbranch, bf16* dbranch_bf16,
                                          float* dweight_partials, float* dbias_partials,
                                          const float* dout, const float* inp, const float* weight,
                                          const float* mean, const float* rstd, int N, int C,
                                          int rows_per_warp, int rows_per_sample,
                                          cuda::KernelDropout dropout) {
  extern __shared__ float shared[];  // [warps][C] weight gradient, then [warps][C] bias gradient
  const int warps = blockDim.x / kWarpSize, warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  float* dweight_mine = shared + size_t(warp) * C;
  float* dbias_mine = shared + size_t(warps + warp) * C;
  for (int c0 = 4 * lane; c0 < C; c0 += 4 * kWarpSize)
    for (int c = c0; c < min(c0 + 4, C); ++c) dweight_mine[c] = dbias_mine[c] = 0.0f;
  const DropoutSpec spec = dropout.resolve();

  const int first_row = (blockIdx.x * warps + warp) * rows_per_warp;
  const int last_row = min(N, first_row + rows_per_warp);
  for (int row = first_row; row < last_row; ++row) {
    const size_t offset = size_t(row) * C;
    const float* x = inp + offset;
    const float* dy = dout + offset;
    const float row_mean = mean[row], row_rstd = rstd[row];
    float g_sum = 0.0f, gn_sum = 0.0f;
    for (int c0 = 4 * lane; c0 < C; c0 += 4 * kWarpSize)
      for (int c = c0; c < min(c0 + 4, C); ++c) {
        const float n = (x[c] - row_mean) * row_rstd;
        const float g = dy[c] * weight[c];
        g_sum += g;
        gn_sum += g * n;
      }
    const float g_mean = cuda::warp_sum(g_sum) / C;
    const float gn_mean = cuda::warp_sum(gn_sum) / C;
    cuda::DropoutCursor mask(spec, static_cast<uint32_t>(row / rows_per_sample));
    const uint64_t first_element = uint64_t(row % rows_per_sample) * C;
    for (int c0 = 4 * lane; c0 < C; c0 += 4 * kWarpSize)
      for (int c = c0; c < min(c0 + 4, C); ++c) {
        const float n = (x[c] - row_mean) * row_rstd;
        const float g = dy[c] * weight[c];
        const float updated = dinp[offset + c] + row_rstd * (g - g_mean - n * gn_mean);
        dinp[offset + c] = updated;
        dweight_mine[c] += dy[c] * n;
        dbias_mine[c] += dy[c];
        if constexpr (kDropoutAdd) {
          const float branch_gradient =
              spec.active() ? updated * mask.multiplier(first_element + c) : updated;
          dbranch[offset + c] = branch_gradient;
          if (dbranch_bf16) dbranch_bf16[offset + c] = __float2bfloat16(branch_gradient);
        }
      }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float dweight_block = 0.0f, dbias_block = 0.0f;
    for (int w = 0; w < warps; ++w) {
      dweight_block += shared[size_t(w) * C + c];
      dbias_block += shared[size_t(warps + w) * C + c];
    }
    dweight_partials[size_t(blockIdx.x) * C + c] = dweight_block;
    if (dbias_partials) dbias_partials[size_t(blockIdx.x) * C + c] = dbias_block;
  }
}

}  // namespace

void CudaBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                    const float* weight, const float* bias, int N, int C) {
  if (N == 0) return;
  bf16* out_bf16 = bf16_output(out, size_t(N) * C);
  wrote(mean, N * sizeof(float));
  wrote(rstd, N * sizeof(float));
  layernorm_forward_kernel<<<cuda::blocks_for(N, kRowsPerBlock), cuda::kBlockThreads, 0, stream_>>>(
      out, out_bf16, mean, rstd, inp, weight, bias, N, C);
  check_launch("layernorm_forward");
}

void CudaBackend::dropout_add_layernorm_forward(float* residual_out, float* ln_out, float* mean,
                                                float* rstd, const float* residual,
                                                const float* branch, const float* weight,
                                                const float* bias, int B, size_t per_sample, int C,
                                                const DropoutSpec& dropout) {
  if (!options_.fused_kernels)
    return Backend::dropout_add_layernorm_forward(residual_out, ln_out, mean, rstd, residual,
                                                  branch, weight, bias, B, per_sample, C, dropout);
  const int N = static_cast<int>(B * per_sample / C);
  if (N == 0) return;
  wrote(residual_out, size_t(N) * C * sizeof(float));
  bf16* ln_bf16 = bf16_output(ln_out, size_t(N) * C);
  wrote(mean, N * sizeof(float));
  wrote(rstd, N * sizeof(float));
  dropout_add_layernorm_forward_kernel<<<cuda::blocks_for(N, kRowsPerBlock), cuda::kBlockThreads, 0,
                                         stream_>>>(
      residual_out, ln_out, ln_bf16, mean, rstd, residual, branch, weight, bias, N, C,
      static_cast<int>(per_sample / C), cuda::KernelDropout{dropout, live_dropout_step()});
  check_launch("dropout_add_layernorm_forward");
}

// The backward pass of both: the plain one (dbranch null) and the fused one.
void CudaBackend::layernorm_dropout_add_backward(float* dinp, float* dbranch, float* dweight,
                                                 float* dbias, const float* dout, const float* inp,
                                                 const float* weight, const float* mean,
                                                 const float* rstd, int B, size_t per_sample, int C,
                                                 const DropoutSpec& dropout) {
  if (dbranch != nullptr && !options_.fused_kernels)
    return Backend::layernorm_dropout_add_backward(dinp, dbranch, dweight, dbias, dout, inp, weight,
                                                   mean, rstd, B, per_sample, C, dropout);
  const int N = static_cast<int>(B * per_sample / C);
  if (N == 0) return;
  wrote(dinp, size_t(N) * C * sizeof(float));
  wrote(dweight, size_t(C) * sizeof(float));
  if (dbias) wrote(dbias, size_t(C) * sizeof(float));
  bf16* dbranch_bf16 = dbranch ? bf16_output(dbranch, size_t(N) * C) : nullptr;

  // Shared memory holds two rows of C per warp: as many warps (up to 8) as fit in 48 KiB.
  const size_t row_bytes = 2 * size_t(C) * sizeof(float);
  const int warps = static_cast<int>(std::clamp<size_t>((48 << 10) / row_bytes, 1, 8));
  const size_t shared_bytes = warps * row_bytes;
  // About 128 blocks, whatever N: few partial rows to add, enough blocks to fill the GPU.
  const int rows_per_warp = std::max(1, (N + warps * 128 - 1) / (warps * 128));
  const int blocks = (N + warps * rows_per_warp - 1) / (warps * rows_per_warp);
  auto* partials =
      static_cast<float*>(scratch(Scratch::kPartialSums, 2 * size_t(blocks) * C * sizeof(float)));
  float* dweight_partials = partials;
  float* dbias_partials = dbias ? partials + size_t(blocks) * C : nullptr;
  const cuda::KernelDropout kernel_dropout{dropout, live_dropout_step()};
  const int rows_per_sample = static_cast<int>(per_sample / C);
  auto kernel = dbranch ? layernorm_backward_kernel<true> : layernorm_backward_kernel<false>;
  if (shared_bytes > (48 << 10))
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(shared_bytes)),
               "cudaFuncSetAttribute(layernorm_backward)");
  kernel<<<blocks, warps * kWarpSize, shared_bytes, stream_>>>(
      dinp, dbranch, dbranch_bf16, dweight_partials, dbias_partials, dout, inp, weight, mean, rstd,
      N, C, rows_per_warp, rows_per_sample, kernel_dropout);
  check_launch("layernorm_backward");
  cuda::add_partial_sums(dweight, dweight_partials, blocks, C, stream_);
  if (dbias) cuda::add_partial_sums(dbias, dbias_partials, blocks, C, stream_);
}

void CudaBackend::layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                     const float* inp, const float* weight, const float* mean,
                                     const float* rstd, int N, int C) {
  layernorm_dropout_add_backward(dinp, nullptr, dweight, dbias, dout, inp, weight, mean, rstd, N,
                                 static_cast<size_t>(C), C, no_dropout());
}

}  // namespace folio
