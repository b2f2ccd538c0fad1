// LayerNorm on the GPU (reference: backend/reference/layernorm.h), and its fusion with the
// residual add before it: one warp per row. Saves mean and rstd per row for the backward pass.
//
// Lanes visit a row in groups of four consecutive channels (lane l takes channels 4l..4l+3, then
// 4(l + warp)..., and so on): a warp reads whole cache lines, and each group of four elements of
// a dropout mask is one Philox call. The same lane owns the same channels in every pass, which
// is what makes the per-block parameter-gradient sums in the backward pass race-free.
#include <algorithm>
#include <initializer_list>
#include <type_traits>

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

// The end of both backward kernels: the block's warps' parameter-gradient rows in shared memory
// ([warps][C] weight, then [warps][C] bias), added in warp order into the block's partial rows.
__device__ void add_warps_into_block_partials(float* dweight_partials, float* dbias_partials,
                                              const float* shared, int warps, int C) {
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

// With n = (x - mean) * rstd and g = dout * weight:
//   dinp += rstd * (g - mean(g) - n * mean(g * n))
// and, fused (kDropoutAdd), dbranch = dropout(the updated dinp). Parameter gradients: each warp
// sums its rows into its own shared-memory rows (a channel only ever touched by its owning
// lane), the block adds its warps in order into one partial row per block, and
// add_partial_sums() adds the blocks in a fixed order.
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
  add_warps_into_block_partials(dweight_partials, dbias_partials, shared, warps, C);
}

// ---- rows held in registers --------------------------------------------------------------------
// For widths of 128 * kQuads channels (kQuads up to kMostQuads: shakespeare_char's 384, GPT-2's
// 768) and 16-byte aligned rows, each lane holds its kQuads groups of four channels in registers,
// one 16-byte load each, all issued before the first is used. The loops above wait out a memory
// latency per element; on an H200 that made LayerNorm and its fused pairs 14% of a
// shakespeare_char step. Same lanes, same channels, same order of sums and of dropout draws as
// the loops; only the backward pass's parameter-gradient sums group rows into more blocks.
constexpr int kMostQuads = 6;

template <int kQuads>
__device__ void load_quads(float4 (&v)[kQuads], const float* row, int lane) {
  const float4* quads = reinterpret_cast<const float4*>(row);
#pragma unroll
  for (int i = 0; i < kQuads; ++i) v[i] = quads[lane + i * kWarpSize];
}

template <int kQuads>
__device__ void store_quads(float* row, const float4 (&v)[kQuads], int lane) {
  float4* quads = reinterpret_cast<float4*>(row);
#pragma unroll
  for (int i = 0; i < kQuads; ++i) quads[lane + i * kWarpSize] = v[i];
}

template <int kQuads>
__device__ void store_quads_bf16(bf16* row, const float4 (&v)[kQuads], int lane) {
#pragma unroll
  for (int i = 0; i < kQuads; ++i) {
    auto* pair = reinterpret_cast<__nv_bfloat162*>(row + 4 * (lane + i * kWarpSize));
    pair[0] = __floats2bfloat162_rn(v[i].x, v[i].y);
    pair[1] = __floats2bfloat162_rn(v[i].z, v[i].w);
  }
}

// Component k (0..3) of a group; k is a constant once the loops are unrolled.
__device__ __forceinline__ float& part(float4& v, int k) { return reinterpret_cast<float*>(&v)[k]; }

// normalize_row() on a row in registers.
template <int kQuads>
__device__ void normalize_quads(float4 (&x)[kQuads], float* out, bf16* out_bf16, float* mean_out,
                                float* rstd_out, const float* weight, const float* bias,
                                int lane) {
  constexpr int C = 4 * kWarpSize * kQuads;
  float4 w[kQuads], b[kQuads];
  load_quads(w, weight, lane);
  if (bias) {
    load_quads(b, bias, lane);
  } else {
#pragma unroll
    for (int i = 0; i < kQuads; ++i) b[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kQuads; ++i)
#pragma unroll
    for (int k = 0; k < 4; ++k) sum += part(x[i], k);
  const float mean = cuda::warp_sum(sum) / C;
  float squares = 0.0f;
#pragma unroll
  for (int i = 0; i < kQuads; ++i)
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float d = part(x[i], k) - mean;
      squares += d * d;
    }
  const float rstd = 1.0f / sqrtf(cuda::warp_sum(squares) / C + kEps);
#pragma unroll
  for (int i = 0; i < kQuads; ++i)
#pragma unroll
    for (int k = 0; k < 4; ++k)
      part(x[i], k) = (part(x[i], k) - mean) * rstd * part(w[i], k) + part(b[i], k);
  store_quads(out, x, lane);
  if (out_bf16) store_quads_bf16(out_bf16, x, lane);
  if (lane == 0) {
    *mean_out = mean;
    *rstd_out = rstd;
  }
}

template <int kQuads>
__global__ void layernorm_forward_quads_kernel(float* out, bf16* out_bf16, float* mean,
                                               float* rstd, const float* inp, const float* weight,
                                               const float* bias, int N) {
  constexpr int C = 4 * kWarpSize * kQuads;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const size_t offset = size_t(row) * C;
  float4 x[kQuads];
  load_quads(x, inp + offset, lane);
  normalize_quads(x, out + offset, out_bf16 ? out_bf16 + offset : nullptr, mean + row, rstd + row,
                  weight, bias, lane);
}

template <int kQuads>
__global__ void dropout_add_layernorm_forward_quads_kernel(
    float* residual_out, float* ln_out, bf16* ln_bf16, float* mean, float* rstd,
    const float* residual, const float* branch, const float* weight, const float* bias, int N,
    int rows_per_sample, cuda::KernelDropout dropout) {
  constexpr int C = 4 * kWarpSize * kQuads;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const size_t offset = size_t(row) * C;
  float4 x[kQuads], added[kQuads];
  load_quads(x, residual + offset, lane);
  load_quads(added, branch + offset, lane);
  const DropoutSpec spec = dropout.resolve();
  cuda::DropoutCursor mask(spec, static_cast<uint32_t>(row / rows_per_sample));
  const uint64_t first_element = uint64_t(row % rows_per_sample) * C;  // within the sample
#pragma unroll
  for (int i = 0; i < kQuads; ++i)
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float value = part(added[i], k);
      if (spec.active()) value *= mask.multiplier(first_element + 4 * (lane + i * kWarpSize) + k);
      part(x[i], k) += value;
    }
  store_quads(residual_out + offset, x, lane);
  normalize_quads(x, ln_out + offset, ln_bf16 ? ln_bf16 + offset : nullptr, mean + row,
                  rstd + row, weight, bias, lane);
}

// layernorm_backward_kernel on rows in registers; each lane sums its channels' parameter gradients
// over the warp's rows in registers, and hands them to the same block sum at the end.
template <int kQuads, bool kDropoutAdd>
__global__ void layernorm_backward_quads_kernel(float* dinp, float* dbranch, bf16* dbranch_bf16,
                                                float* dweight_partials, float* dbias_partials,
                                                const float* dout, const float* inp,
                                                const float* weight, const float* mean,
                                                const float* rstd, int N, int rows_per_warp,
                                                int rows_per_sample, cuda::KernelDropout dropout) {
  constexpr int C = 4 * kWarpSize * kQuads;
  extern __shared__ float shared[];  // [warps][C] weight gradient, then [warps][C] bias gradient
  const int warps = blockDim.x / kWarpSize, warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  float4 w[kQuads], dweight_mine[kQuads], dbias_mine[kQuads];
  load_quads(w, weight, lane);
#pragma unroll
  for (int i = 0; i < kQuads; ++i)
    dweight_mine[i] = dbias_mine[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const DropoutSpec spec = dropout.resolve();

  const int first_row = (blockIdx.x * warps + warp) * rows_per_warp;
  const int last_row = min(N, first_row + rows_per_warp);
  for (int row = first_row; row < last_row; ++row) {
    const size_t offset = size_t(row) * C;
    float4 x[kQuads], dy[kQuads], gradient[kQuads];
    load_quads(x, inp + offset, lane);
    load_quads(dy, dout + offset, lane);
    load_quads(gradient, dinp + offset, lane);
    const float row_mean = mean[row], row_rstd = rstd[row];
    float g_sum = 0.0f, gn_sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kQuads; ++i)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float n = (part(x[i], k) - row_mean) * row_rstd;
        const float g = part(dy[i], k) * part(w[i], k);
        g_sum += g;
        gn_sum += g * n;
      }
    const float g_mean = cuda::warp_sum(g_sum) / C;
    const float gn_mean = cuda::warp_sum(gn_sum) / C;
    cuda::DropoutCursor mask(spec, static_cast<uint32_t>(row / rows_per_sample));
    const uint64_t first_element = uint64_t(row % rows_per_sample) * C;
#pragma unroll
    for (int i = 0; i < kQuads; ++i)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float n = (part(x[i], k) - row_mean) * row_rstd;
        const float g = part(dy[i], k) * part(w[i], k);
        const float updated = part(gradient[i], k) + row_rstd * (g - g_mean - n * gn_mean);
        part(gradient[i], k) = updated;
        part(dweight_mine[i], k) += part(dy[i], k) * n;
        part(dbias_mine[i], k) += part(dy[i], k);
        if constexpr (kDropoutAdd) {
          // x is spent: it holds the branch's gradient from here on
          part(x[i], k) = spec.active() ? updated * mask.multiplier(first_element +
                                                                     4 * (lane + i * kWarpSize) + k)
                                        : updated;
        }
      }
    store_quads(dinp + offset, gradient, lane);
    if constexpr (kDropoutAdd) {
      store_quads(dbranch + offset, x, lane);
      if (dbranch_bf16) store_quads_bf16(dbranch_bf16 + offset, x, lane);
    }
  }
  store_quads(shared + size_t(warp) * C, dweight_mine, lane);
  store_quads(shared + size_t(warps + warp) * C, dbias_mine, lane);
  __syncthreads();
  add_warps_into_block_partials(dweight_partials, dbias_partials, shared, warps, C);
}

// C as groups of four per lane (1..kMostQuads) where the kernels above take it: C a multiple of
// 128 and every row 16-byte aligned (every pointer, given C's rows of 512 bytes and more); else 0,
// for the loops.
int quads_per_lane(int C, std::initializer_list<const void*> pointers) {
  if (C % (4 * kWarpSize) != 0 || C / (4 * kWarpSize) > kMostQuads) return 0;
  return cuda::all_16_byte_aligned(pointers) ? C / (4 * kWarpSize) : 0;
}

template <typename Launch>
void with_quads(int quads, Launch&& launch) {
  switch (quads) {
    case 1: return launch(std::integral_constant<int, 1>{});
    case 2: return launch(std::integral_constant<int, 2>{});
    case 3: return launch(std::integral_constant<int, 3>{});
    case 4: return launch(std::integral_constant<int, 4>{});
    case 5: return launch(std::integral_constant<int, 5>{});
    case 6: return launch(std::integral_constant<int, 6>{});
    default: break;
  }
}

}  // namespace

void CudaBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                    const float* weight, const float* bias, int N, int C,
                                    ReadBy /*out_read_by: the GPU keeps and writes every output*/) {
  if (N == 0) return;
  bf16* out_bf16 = bf16_output(out, size_t(N) * C);
  wrote(mean, N * sizeof(float));
  wrote(rstd, N * sizeof(float));
  const unsigned blocks = cuda::blocks_for(N, kRowsPerBlock);
  if (const int quads = quads_per_lane(C, {out, out_bf16, inp, weight, bias})) {
    with_quads(quads, [&](auto q) {
      layernorm_forward_quads_kernel<decltype(q)::value>
          <<<blocks, cuda::kBlockThreads, 0, stream_>>>(out, out_bf16, mean, rstd, inp, weight,
                                                        bias, N);
    });
  } else {
    layernorm_forward_kernel<<<blocks, cuda::kBlockThreads, 0, stream_>>>(
        out, out_bf16, mean, rstd, inp, weight, bias, N, C);
  }
  check_launch("layernorm_forward");
}

void CudaBackend::dropout_add_layernorm_forward(float* residual_out, float* ln_out, float* mean,
                                                float* rstd, const float* residual,
                                                const float* branch, const float* weight,
                                                const float* bias, int B, size_t per_sample, int C,
                                                const DropoutSpec& dropout,
                                                ReadBy ln_out_read_by) {
  if (!options_.fused_kernels)
    return Backend::dropout_add_layernorm_forward(residual_out, ln_out, mean, rstd, residual,
                                                  branch, weight, bias, B, per_sample, C, dropout,
                                                  ln_out_read_by);
  const int N = static_cast<int>(B * per_sample / C);
  if (N == 0) return;
  wrote(residual_out, size_t(N) * C * sizeof(float));
  bf16* ln_bf16 = bf16_output(ln_out, size_t(N) * C);
  wrote(mean, N * sizeof(float));
  wrote(rstd, N * sizeof(float));
  const unsigned blocks = cuda::blocks_for(N, kRowsPerBlock);
  const int rows_per_sample = static_cast<int>(per_sample / C);
  const cuda::KernelDropout kernel_dropout{dropout, live_dropout_step()};
  if (const int quads =
          quads_per_lane(C, {residual_out, ln_out, ln_bf16, residual, branch, weight, bias})) {
    with_quads(quads, [&](auto q) {
      dropout_add_layernorm_forward_quads_kernel<decltype(q)::value>
          <<<blocks, cuda::kBlockThreads, 0, stream_>>>(residual_out, ln_out, ln_bf16, mean, rstd,
                                                        residual, branch, weight, bias, N,
                                                        rows_per_sample, kernel_dropout);
    });
  } else {
    dropout_add_layernorm_forward_kernel<<<blocks, cuda::kBlockThreads, 0, stream_>>>(
        residual_out, ln_out, ln_bf16, mean, rstd, residual, branch, weight, bias, N, C,
        rows_per_sample, kernel_dropout);
  }
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
  const int quads = quads_per_lane(C, {dinp, dbranch, dbranch_bf16, dout, inp, weight});
  // About 128 blocks, whatever N: few partial rows to add, enough blocks to fill the GPU. Rows in
  // registers take 512: a warp's rows follow one another, each waiting out one memory latency,
  // so more warps in flight hide more of them (512 partial rows are still little to add).
  const int target_blocks = quads ? 512 : 128;
  const int rows_per_warp =
      std::max(1, (N + warps * target_blocks - 1) / (warps * target_blocks));
  const int blocks = (N + warps * rows_per_warp - 1) / (warps * rows_per_warp);
  auto* partials =
      static_cast<float*>(scratch(Scratch::kPartialSums, 2 * size_t(blocks) * C * sizeof(float)));
  float* dweight_partials = partials;
  float* dbias_partials = dbias ? partials + size_t(blocks) * C : nullptr;
  const cuda::KernelDropout kernel_dropout{dropout, live_dropout_step()};
  const int rows_per_sample = static_cast<int>(per_sample / C);
  if (quads) {  // at most 6 x 128 channels: 2 x 8 warps x 768 floats fit the default 48 KiB
    with_quads(quads, [&](auto q) {
      constexpr int kQuads = decltype(q)::value;
      auto kernel = dbranch ? layernorm_backward_quads_kernel<kQuads, true>
                            : layernorm_backward_quads_kernel<kQuads, false>;
      kernel<<<blocks, warps * kWarpSize, shared_bytes, stream_>>>(
          dinp, dbranch, dbranch_bf16, dweight_partials, dbias_partials, dout, inp, weight, mean,
          rstd, N, rows_per_warp, rows_per_sample, kernel_dropout);
    });
  } else {
    auto kernel = dbranch ? layernorm_backward_kernel<true> : layernorm_backward_kernel<false>;
    if (shared_bytes > (48 << 10))
      check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(shared_bytes)),
                 "cudaFuncSetAttribute(layernorm_backward)");
    kernel<<<blocks, warps * kWarpSize, shared_bytes, stream_>>>(
        dinp, dbranch, dbranch_bf16, dweight_partials, dbias_partials, dout, inp, weight, mean,
        rstd, N, C, rows_per_warp, rows_per_sample, kernel_dropout);
  }
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
