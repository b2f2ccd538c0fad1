// Causal multi-head attention on the GPU (reference: backend/reference/attention.h).
//
// Flash attention (attention_kernels.h says how it works and what it saves): in bf16 on tensor
// cores when the backend computes in bf16 and the head size allows (attention_flash_bf16.cu),
// else in fp32 on CUDA cores (this file). With flash attention off (bench --ladder's first
// rungs), or a head size above 128, attention_unfused.cu writes out the probabilities instead.
#include <algorithm>
#include <string>
#include <type_traits>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/cuda_backend.h"

namespace folio {

namespace cuda {

namespace {

constexpr int kFp32Rows = 64;   // query rows (or key rows) per block, one per thread
constexpr int kFp32Tile = 32;   // keys (or queries) per shared-memory tile
constexpr int kScoreChunk = 8;  // scores held in registers between two rescalings

// Calls launch(std::integral_constant<int, P>) with P the smallest of 16, 32, 64, 128 that holds
// the head: the kernels keep a head's row in P registers.
template <typename Launch>
void with_head_registers(int head_size, Launch&& launch) {
  if (head_size <= 16) {
    launch(std::integral_constant<int, 16>{});
  } else if (head_size <= 32) {
    launch(std::integral_constant<int, 32>{});
  } else if (head_size <= 64) {
    launch(std::integral_constant<int, 64>{});
  } else if (head_size <= kLargestFlashHeadSize) {
    launch(std::integral_constant<int, kLargestFlashHeadSize>{});
  } else {
    throw Error("internal: flash attention takes head sizes up to 128");
  }
}

// Keys and values of rows j0 .. j0 + kFp32Tile - 1 (zero past T) into shared tiles, row-major.
__device__ void load_key_value_tile(float* keys, float* values, const HeadBlock& head, int j0,
                                    const AttentionShape& s) {
  const int hs = s.head_size, A = s.width();
  for (int e = threadIdx.x; e < kFp32Tile * hs; e += blockDim.x) {
    const int j = j0 + e / hs, d = e % hs;
    const float* row = head.q + size_t(j) * 3 * A;
    keys[e] = j < s.T ? row[A + d] : 0.0f;
    values[e] = j < s.T ? row[2 * A + d] : 0.0f;
  }
}

// q . k and g . v over the hs (at most kHead) columns of a head, together.
template <int kHead>
__device__ __forceinline__ void two_dots(const float* q, const float* k, const float* g,
                                         const float* v, int hs, float& qk, float& gv) {
  qk = gv = 0.0f;
#pragma unroll
  for (int d = 0; d < kHead; ++d)
    if (d < hs) {
      qk += q[d] * k[d];
      gv += g[d] * v[d];
    }
}

// ---- forward: one thread per query row ----------------------------------------------------------
// The thread keeps its query and output row in registers and walks the key tiles its row can
// see, scoring kScoreChunk keys at a time before rescaling the output once for all of them.
template <int kHead>
__global__ void __launch_bounds__(kFp32Rows) flash_forward_fp32_kernel(AttentionForwardArgs args) {
  __shared__ float keys[kFp32Tile * kHead], values[kFp32Tile * kHead];
  const AttentionShape s = args.shape;
  const int hs = s.head_size, A = s.width();
  const HeadBlock head = head_block(s, args.qkv, nullptr);
  const int i = args.q_start + blockIdx.x * kFp32Rows + threadIdx.x;
  const int last_row = min(s.T - 1, args.q_start + int(blockIdx.x + 1) * kFp32Rows - 1);
  const bool valid = i < s.T;

  float q[kHead], acc[kHead];
#pragma unroll
  for (int d = 0; d < kHead; ++d) {
    q[d] = valid && d < hs ? head.q[size_t(i) * 3 * A + d] : 0.0f;
    acc[d] = 0.0f;
  }
  float row_max = -INFINITY, row_sum = 0.0f;
  const DropoutSpec spec = args.dropout.resolve();
  DropoutCursor mask(spec, static_cast<uint32_t>(head.b));
  const uint64_t mask_row = (uint64_t(head.h) * s.T + i) * s.T;

  for (int j0 = 0; j0 <= last_row; j0 += kFp32Tile) {
    __syncthreads();  // the previous tile is no longer read
    load_key_value_tile(keys, values, head, j0, s);
    __syncthreads();
    if (!valid) continue;
    const int visible = min(kFp32Tile, i - j0 + 1);  // keys j <= i
    for (int c0 = 0; c0 < visible; c0 += kScoreChunk) {
      float score[kScoreChunk];
      float chunk_max = -INFINITY;
#pragma unroll
      for (int u = 0; u < kScoreChunk; ++u) {
        score[u] = -INFINITY;
        if (c0 + u < visible) {
          const float* k = keys + (c0 + u) * hs;
          float dot = 0.0f;
#pragma unroll
          for (int d = 0; d < kHead; ++d)
            if (d < hs) dot += q[d] * k[d];
          score[u] = dot * head.scale;
          chunk_max = fmaxf(chunk_max, score[u]);
        }
      }
      const float new_max = fmaxf(row_max, chunk_max);
      const float correction = expf(row_max - new_max);  // 0 before the first key
      row_sum *= correction;
#pragma unroll
      for (int d = 0; d < kHead; ++d) acc[d] *= correction;
#pragma unroll
      for (int u = 0; u < kScoreChunk; ++u) {
        if (c0 + u >= visible) continue;
        const float p = expf(score[u] - new_max);
        row_sum += p;  // the softmax normalises before dropout
        const float weight = spec.active() ? p * mask.multiplier(mask_row + j0 + c0 + u) : p;
        const float* v = values + (c0 + u) * hs;
#pragma unroll
        for (int d = 0; d < kHead; ++d)
          if (d < hs) acc[d] += weight * v[d];
      }
      row_max = new_max;
    }
  }
  if (!valid) return;
  const float inverse = 1.0f / row_sum;
  const size_t offset = (size_t(head.b) * s.T + i) * A + head.h * hs;
#pragma unroll
  for (int d = 0; d < kHead; ++d) {
    if (d >= hs) continue;
    const float o = acc[d] * inverse;
    args.out[offset + d] = o;
    args.out_copy[offset + d] = o;
    if (args.out_bf16) args.out_bf16[offset + d] = __float2bfloat16(o);
  }
  args.lse[size_t(head.bh) * s.T + i] = row_max + logf(row_sum);
}

// ---- backward -----------------------------------------------------------------------------------
// With p = exp(q.k * scale - lse), m the dropout multiplier, dp = dout_i . v_j and D_i = dout_i .
// out_i:   dv_j += p m dout_i,   ds = p (dp m - D_i) scale,   dk_j += ds q_i,   dq_i += ds k_j.

// Shared memory of both backward kernels: the block's own rows (one per thread, stride hs + 1 so
// that threads reading their own rows hit different banks), then a tile of the other side's rows
// (read by all threads at once: a broadcast), then the tile's lse and D.
size_t backward_fp32_shared_bytes(int hs) {
  return (2 * size_t(kFp32Rows) * (hs + 1) + 2 * size_t(kFp32Tile) * hs + 2 * kFp32Tile) *
         sizeof(float);
}

// Row `row` of a (T, hs) matrix whose rows are `ld` apart into a thread's own shared row; zero
// past T.
__device__ void load_own_row(float* own, const float* x, int row, size_t ld, int hs, int T) {
  for (int d = 0; d < hs; ++d) own[d] = row < T ? x[size_t(row) * ld + d] : 0.0f;
}

// dk and dv for one block of keys (one per thread), over every query that sees them.
template <int kHead>
__global__ void __launch_bounds__(kFp32Rows)
    flash_backward_keys_fp32_kernel(AttentionBackwardArgs args) {
  extern __shared__ float shared[];
  const AttentionShape s = args.shape;
  const int hs = s.head_size, A = s.width();
  float* k = shared + threadIdx.x * (hs + 1);
  float* v = shared + (kFp32Rows + threadIdx.x) * (hs + 1);
  float* queries = shared + 2 * kFp32Rows * (hs + 1);
  float* out_grads = queries + kFp32Tile * hs;
  float* tile_lse = out_grads + kFp32Tile * hs;
  float* tile_dot = tile_lse + kFp32Tile;
  const HeadBlock head = head_block(s, args.qkv, args.dout);
  const int j = blockIdx.x * kFp32Rows + threadIdx.x;
  const bool valid = j < s.T;
  load_own_row(k, head.q + A, j, 3 * size_t(A), hs, s.T);
  load_own_row(v, head.q + 2 * A, j, 3 * size_t(A), hs, s.T);
  float dk[kHead], dv[kHead];
#pragma unroll
  for (int d = 0; d < kHead; ++d) dk[d] = dv[d] = 0.0f;
  const DropoutSpec spec = args.dropout.resolve();
  DropoutCursor mask(spec, static_cast<uint32_t>(head.b));

  // Queries before the block's first key see none of its keys.
  for (int i0 = blockIdx.x * kFp32Rows; i0 < s.T; i0 += kFp32Tile) {
    __syncthreads();
    for (int e = threadIdx.x; e < kFp32Tile * hs; e += blockDim.x) {
      const int i = i0 + e / hs, d = e % hs;
      queries[e] = i < s.T ? head.q[size_t(i) * 3 * A + d] : 0.0f;
      out_grads[e] = i < s.T ? head.dout[size_t(i) * A + d] : 0.0f;
    }
    for (int ii = threadIdx.x; ii < kFp32Tile; ii += blockDim.x) {
      const int i = i0 + ii;
      tile_lse[ii] = i < s.T ? args.lse[size_t(head.bh) * s.T + i] : INFINITY;
      tile_dot[ii] = i < s.T ? args.row_dot[size_t(head.bh) * s.T + i] : 0.0f;
    }
    __syncthreads();
    if (!valid) continue;
    for (int ii = 0; ii < kFp32Tile; ++ii) {
      const int i = i0 + ii;
      if (i < j || i >= s.T) continue;  // query i sees key j when j <= i
      const float* q = queries + ii * hs;
      const float* go = out_grads + ii * hs;
      float score, dp;
      two_dots<kHead>(q, k, go, v, hs, score, dp);
      const float p = expf(score * head.scale - tile_lse[ii]);
      const float m =
          spec.active() ? mask.multiplier((uint64_t(head.h) * s.T + i) * s.T + j) : 1.0f;
      const float ds = p * (dp * m - tile_dot[ii]) * head.scale;
#pragma unroll
      for (int d = 0; d < kHead; ++d)
        if (d < hs) {
          dv[d] += p * m * go[d];
          dk[d] += ds * q[d];
        }
    }
  }
  if (!valid) return;
  const size_t offset = (size_t(head.b) * s.T + j) * 3 * A + head.h * hs;
#pragma unroll
  for (int d = 0; d < kHead; ++d) {
    if (d >= hs) continue;
    args.dqkv[offset + A + d] = dk[d];
    args.dqkv[offset + 2 * A + d] = dv[d];
    if (args.dqkv_bf16) {
      args.dqkv_bf16[offset + A + d] = __float2bfloat16(dk[d]);
      args.dqkv_bf16[offset + 2 * A + d] = __float2bfloat16(dv[d]);
    }
  }
}

// dq for one block of queries (one per thread), over every key they see.
template <int kHead>
__global__ void __launch_bounds__(kFp32Rows)
    flash_backward_queries_fp32_kernel(AttentionBackwardArgs args) {
  extern __shared__ float shared[];
  const AttentionShape s = args.shape;
  const int hs = s.head_size, A = s.width();
  float* q = shared + threadIdx.x * (hs + 1);
  float* go = shared + (kFp32Rows + threadIdx.x) * (hs + 1);
  float* keys = shared + 2 * kFp32Rows * (hs + 1);
  float* values = keys + kFp32Tile * hs;
  const HeadBlock head = head_block(s, args.qkv, args.dout);
  const int i = blockIdx.x * kFp32Rows + threadIdx.x;
  const int last_row = min(s.T - 1, int(blockIdx.x + 1) * kFp32Rows - 1);
  const bool valid = i < s.T;
  load_own_row(q, head.q, i, 3 * size_t(A), hs, s.T);
  load_own_row(go, head.dout, i, A, hs, s.T);
  const float lse = valid ? args.lse[size_t(head.bh) * s.T + i] : 0.0f;
  const float row_dot = valid ? args.row_dot[size_t(head.bh) * s.T + i] : 0.0f;
  float dq[kHead];
#pragma unroll
  for (int d = 0; d < kHead; ++d) dq[d] = 0.0f;
  const DropoutSpec spec = args.dropout.resolve();
  DropoutCursor mask(spec, static_cast<uint32_t>(head.b));
  const uint64_t mask_row = (uint64_t(head.h) * s.T + i) * s.T;

  for (int j0 = 0; j0 <= last_row; j0 += kFp32Tile) {
    __syncthreads();
    load_key_value_tile(keys, values, head, j0, s);
    __syncthreads();
    if (!valid) continue;
    const int visible = min(kFp32Tile, i - j0 + 1);
    for (int jj = 0; jj < visible; ++jj) {
      const float* k = keys + jj * hs;
      float score, dp;
      two_dots<kHead>(q, k, go, values + jj * hs, hs, score, dp);
      const float p = expf(score * head.scale - lse);
      const float m = spec.active() ? mask.multiplier(mask_row + j0 + jj) : 1.0f;
      const float ds = p * (dp * m - row_dot) * head.scale;
#pragma unroll
      for (int d = 0; d < kHead; ++d)
        if (d < hs) dq[d] += ds * k[d];
    }
  }
  if (!valid) return;
  const size_t offset = (size_t(head.b) * s.T + i) * 3 * A + head.h * hs;
#pragma unroll
  for (int d = 0; d < kHead; ++d) {
    if (d >= hs) continue;
    args.dqkv[offset + d] = dq[d];
    if (args.dqkv_bf16) args.dqkv_bf16[offset + d] = __float2bfloat16(dq[d]);
  }
}

// D[b, h, t] = dout[b, t, head h] . out[b, t, head h]: one warp per (b, t, h).
__global__ void attention_row_dot_kernel(float* row_dot, const float* dout, const float* out,
                                         AttentionShape s) {
  const size_t warp_index = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (warp_index >= size_t(s.B) * s.T * s.H) return;
  const int h = static_cast<int>(warp_index % s.H);
  const size_t bt = warp_index / s.H;
  const size_t offset = bt * s.width() + size_t(h) * s.head_size;
  float total = 0.0f;
  for (int d = lane; d < s.head_size; d += kWarpSize) total += dout[offset + d] * out[offset + d];
  total = warp_sum(total);
  const size_t b = bt / s.T, t = bt % s.T;
  if (lane == 0) row_dot[(b * s.H + h) * s.T + t] = total;
}

dim3 attention_grid(int rows, int rows_per_block, const AttentionShape& s) {
  if (size_t(s.B) * s.H > 65535) throw Error("attention: batch_size * n_head above 65535");
  return dim3(blocks_for(rows, rows_per_block), s.B * s.H);
}

}  // namespace

void flash_attention_forward_fp32(const AttentionForwardArgs& args, cudaStream_t stream) {
  const dim3 grid = attention_grid(args.shape.T - args.q_start, kFp32Rows, args.shape);
  with_head_registers(args.shape.head_size, [&](auto head) {
    flash_forward_fp32_kernel<decltype(head)::value><<<grid, kFp32Rows, 0, stream>>>(args);
  });
  check_launch("flash_forward_fp32");
}

void flash_attention_backward_fp32(const AttentionBackwardArgs& args, cudaStream_t stream) {
  const dim3 grid = attention_grid(args.shape.T, kFp32Rows, args.shape);
  const size_t shared_bytes = backward_fp32_shared_bytes(args.shape.head_size);
  with_head_registers(args.shape.head_size, [&](auto head) {
    constexpr int kHead = decltype(head)::value;
    for (auto kernel :
         {flash_backward_keys_fp32_kernel<kHead>, flash_backward_queries_fp32_kernel<kHead>}) {
      if (shared_bytes > (48 << 10))
        check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(shared_bytes)),
                   "cudaFuncSetAttribute(flash_backward_fp32)");
      kernel<<<grid, kFp32Rows, shared_bytes, stream>>>(args);
      check_launch("flash_backward_fp32");
    }
  });
}

}  // namespace cuda

// ---- the ops ------------------------------------------------------------------------------------

bool CudaBackend::uses_flash_attention(int head_size) const {
  return options_.flash_attention && head_size <= cuda::kLargestFlashHeadSize;
}

bool CudaBackend::uses_tensor_core_attention(int head_size) const {
  return bf16_ && uses_flash_attention(head_size) &&
         cuda::tensor_core_attention_supports(head_size);
}

size_t CudaBackend::attention_saved_floats(int B, int T, int H, int head_size) const {
  if (!uses_flash_attention(head_size)) return size_t(B) * H * T * T;  // the probabilities
  return size_t(B) * H * T + size_t(B) * T * H * head_size;            // lse, and the output
}

cuda::AttentionMaskBits CudaBackend::attention_masks_to_keep(const float* saved,
                                                             const DropoutSpec& dropout, int B,
                                                             int T, int H) {
  auto found = std::find_if(attention_masks_.begin(), attention_masks_.end(),
                            [&](const AttentionMasks& masks) { return masks.saved == saved; });
  if (found == attention_masks_.end()) {
    if (capturing_) return {};
    found = attention_masks_.insert(attention_masks_.end(), AttentionMasks{});
    found->saved = saved;
  }
  AttentionMasks& masks = *found;
  masks.kept = false;
  const int words_per_row = cuda::AttentionMaskBits::words_per_row_of(T);
  const size_t bytes = size_t(B) * H * T * words_per_row * sizeof(uint32_t);
  if (masks.words.bytes() < bytes) {
    if (capturing_) return {};  // nothing may be allocated: this step draws them twice
    masks.words = DeviceMemory();
    masks.words = DeviceMemory(bytes);
    // Where a row's groups of 16 keys are odd in number, the forward leaves its last word's upper
    // half unwritten, and the backward's 32-bit loads read it (bits of keys past T, never used):
    // zeros, so that compute-sanitizer's initcheck finds nothing uninitialised. Not recording: no
    // allocation happens inside a recorded step (above).
    check_cuda(cudaMemsetAsync(masks.words.get(), 0, bytes, stream_), "cudaMemsetAsync");
  }
  masks.dropout = dropout;
  masks.B = B, masks.T = T, masks.H = H;
  masks.kept = true;
  return {masks.words.as<uint32_t>(), words_per_row};
}

cuda::AttentionMaskBits CudaBackend::kept_attention_masks(const float* saved,
                                                          const DropoutSpec& dropout, int B, int T,
                                                          int H) {
  for (const AttentionMasks& masks : attention_masks_)
    if (masks.saved == saved && masks.kept && draws_the_same_masks(masks.dropout, dropout) &&
        masks.B == B && masks.T == T && masks.H == H)
      return {masks.words.as<uint32_t>(), cuda::AttentionMaskBits::words_per_row_of(T)};
  return {};
}

void CudaBackend::attention_forward(float* out, float* saved, const float* qkv, int B, int T, int H,
                                    int hs, int q_start, const DropoutSpec& dropout) {
  if (B == 0 || q_start >= T) return;
  if (!uses_flash_attention(hs)) {
    ++attention_launches_.unfused_forward;
    return unfused_attention_forward(out, saved, qkv, B, T, H, hs, q_start, dropout);
  }
  const size_t out_floats = size_t(B) * T * H * hs;
  cuda::AttentionForwardArgs args{};
  // Generation rewrites only the last rows: the bf16 copy would be partly stale.
  if (q_start == 0) {
    args.out_bf16 = bf16_output(out, out_floats);
  } else {
    wrote(out, out_floats * sizeof(float));
  }
  wrote(saved, attention_saved_floats(B, T, H, hs) * sizeof(float));
  args.out = out;
  args.lse = saved;
  args.out_copy = saved + size_t(B) * H * T;
  args.qkv = qkv;
  args.shape = {B, T, H, hs};
  args.q_start = q_start;
  args.dropout = {dropout, live_dropout_step()};
  if (uses_tensor_core_attention(hs)) {
    if (forward_kernels_ != AttentionKernels::kWmma) {
      const cuda::RegisterKernelOptions options{
          forward_kernels_ == AttentionKernels::kStaged && cuda::staged_attention_supports(hs),
          ldmatrix_fragments_};
      // Kept only where a register backward kernel will read them: head size 128's backward,
      // and any with FOLIO_ATTENTION_BACKWARD=wmma, is the WMMA kernels', which draw their own.
      const bool backward_reads_bits = backward_kernels_ != AttentionKernels::kWmma &&
                                       cuda::register_attention_backward_supports(hs);
      if (attention_mask_bits_ && backward_reads_bits && dropout.active() && q_start == 0) {
        args.masks = attention_masks_to_keep(saved, dropout, B, T, H);
        attention_launches_.mask_bits_kept += args.masks.words != nullptr;
      }
      cuda::flash_attention_forward_registers(args, stream_, options);
      ++attention_launches_.register_forward;
      attention_launches_.staged_forward += options.staged;
      attention_launches_.ldmatrix_forward += options.ldmatrix;
    } else {
      cuda::flash_attention_forward_bf16(args, stream_);
    }
    ++attention_launches_.tensor_core_forward;
  } else {
    cuda::flash_attention_forward_fp32(args, stream_);
    ++attention_launches_.fp32_flash_forward;
  }
}

void CudaBackend::attention_backward(float* dqkv, const float* dout, const float* qkv,
                                     const float* saved, int B, int T, int H, int hs,
                                     const DropoutSpec& dropout,
                                     ReadBy /*dqkv_read_by: the GPU writes every output*/) {
  if (B == 0 || T == 0) return;
  if (!uses_flash_attention(hs)) {
    ++attention_launches_.unfused_backward;
    return unfused_attention_backward(dqkv, dout, qkv, saved, B, T, H, hs, dropout);
  }
  const cuda::AttentionShape shape{B, T, H, hs};
  const size_t rows = size_t(B) * H * T;
  auto* row_dot = static_cast<float*>(scratch(Scratch::kAttentionRowDot, rows * sizeof(float)));
  cuda::attention_row_dot_kernel<<<cuda::blocks_for(rows * cuda::kWarpSize, cuda::kBlockThreads),
                                   cuda::kBlockThreads, 0, stream_>>>(row_dot, dout, saved + rows,
                                                                      shape);
  check_launch("attention_row_dot");
  cuda::AttentionBackwardArgs args{};
  args.dqkv = dqkv;
  args.dqkv_bf16 = bf16_output(dqkv, size_t(B) * T * 3 * H * hs);
  args.dout = dout;
  args.qkv = qkv;
  args.lse = saved;
  args.row_dot = row_dot;
  args.shape = shape;
  args.dropout = {dropout, live_dropout_step()};
  if (uses_tensor_core_attention(hs)) {
    if (backward_kernels_ != AttentionKernels::kWmma &&
        cuda::register_attention_backward_supports(hs)) {
      const cuda::RegisterKernelOptions options{
          backward_kernels_ == AttentionKernels::kStaged && cuda::staged_attention_supports(hs),
          ldmatrix_fragments_};
      if (attention_mask_bits_ && dropout.active()) {
        args.masks = kept_attention_masks(saved, dropout, B, T, H);
        attention_launches_.mask_bits_recalled += args.masks.words != nullptr;
      }
      cuda::flash_attention_backward_registers(args, stream_, options);
      ++attention_launches_.register_backward;
      attention_launches_.staged_backward += options.staged;
      attention_launches_.ldmatrix_backward += options.ldmatrix;
    } else {
      cuda::flash_attention_backward_bf16(args, stream_);
    }
    ++attention_launches_.tensor_core_backward;
  } else {
    cuda::flash_attention_backward_fp32(args, stream_);
    ++attention_launches_.fp32_flash_backward;
  }
}

}  // namespace folio
