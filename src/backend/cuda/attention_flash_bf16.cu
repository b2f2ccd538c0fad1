// Flash attention with bf16 products on tensor cores (attention_kernels.h has the algorithm).
//
// A block is four warps; each warp owns 16 rows of the block's 64 (queries in the forward and dq
// kernels, keys in the dk/dv kernel) and steps through tiles of 64 of the other side. Products
// go through WMMA 16x16x16 bf16 fragments with fp32 accumulators: a warp scores its 16 rows
// against the tile into shared memory, the softmax, dropout and gradient arithmetic run on those
// scores in fp32 by ordinary lanes, and the results go back through fragments. Numerics: q, k,
// v, dout and the probabilities and score gradients that feed products are rounded to bf16;
// scores, softmax statistics and every accumulator are fp32.
//
// WMMA's fragment layout is opaque, so the running output (which the online softmax rescales
// row by row) stays in shared memory between tiles rather than in registers. HIP: rocWMMA has
// the same fragment API; the warp size comes from kWarpSize.
#include <mma.h>

#include <type_traits>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/attention_tiles.cuh"
#include "backend/cuda/cuda_memory.h"
#include "core/error.h"

namespace folio::cuda {

namespace {

namespace wmma = nvcuda::wmma;

constexpr int kLanesPerRow = kWarpSize / kTile;  // lanes sharing one of a warp's 16 rows

using FragmentA = wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, bf16, wmma::row_major>;
using FragmentB = wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, bf16, wmma::row_major>;
using FragmentBTransposed =
    wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, bf16, wmma::col_major>;
using Accumulator = wmma::fragment<wmma::accumulator, kTile, kTile, kTile, float>;

template <int kHead>
struct ForwardTiles : Strides<kHead> {
  using S = Strides<kHead>;
  alignas(32) bf16 q[kRows * S::kHeadRow];
  alignas(32) bf16 k[kStep * S::kHeadRow];
  alignas(32) bf16 v[kStep * S::kHeadRow];
  alignas(32) float score[kRows * S::kScoreRow];
  alignas(32) bf16 prob[kRows * S::kProbRow];
  alignas(32) float out[kRows * S::kOutRow];
  float row_max[kRows], row_sum[kRows];
};

template <int kHead>
struct BackwardTiles : Strides<kHead> {
  using S = Strides<kHead>;
  alignas(32) bf16 own_a[kRows * S::kHeadRow];    // the block's keys (dk/dv) or queries (dq)
  alignas(32) bf16 own_b[kRows * S::kHeadRow];    // its values, or output gradients
  alignas(32) bf16 step_a[kStep * S::kHeadRow];   // this step's queries, or keys
  alignas(32) bf16 step_b[kStep * S::kHeadRow];   // its output gradients, or values
  alignas(32) float score[kRows * S::kScoreRow];  // with dprob: the results' staging at the end
  alignas(32) float dprob[kRows * S::kScoreRow];
  alignas(32) bf16 prob[kRows * S::kProbRow];
  alignas(32) bf16 dscore[kRows * S::kProbRow];
  float lse[kRows],
      row_dot[kRows];  // of the query rows (own in dq, the step's in dk/dv); lse times log2(e)
  static_assert(kRows == kStep);
  static_assert(kRows * S::kOutRow <= 2 * kRows * S::kScoreRow);
};


// out (16 x 16 tiles along a row of kColumns) = a (16 x kInner) b, a row-major in shared memory,
// b as given; one warp.
template <typename FragmentOfB, int kInner, int kColumns>
__device__ void warp_product(float* out, int out_ld, const bf16* a, int a_ld, const bf16* b,
                             int b_ld) {
#pragma unroll
  for (int n = 0; n < kColumns / kTile; ++n) {
    Accumulator accumulator;
    wmma::fill_fragment(accumulator, 0.0f);
#pragma unroll
    for (int kk = 0; kk < kInner / kTile; ++kk) {
      FragmentA a_part;
      FragmentOfB b_part;
      wmma::load_matrix_sync(a_part, a + kk * kTile, a_ld);
      // b's (kk, n) block: for a transposed view, column n of b is row n of what is stored.
      if constexpr (std::is_same_v<FragmentOfB, FragmentBTransposed>) {
        wmma::load_matrix_sync(b_part, b + n * kTile * b_ld + kk * kTile, b_ld);
      } else {
        wmma::load_matrix_sync(b_part, b + kk * kTile * b_ld + n * kTile, b_ld);
      }
      wmma::mma_sync(accumulator, a_part, b_part, accumulator);
    }
    wmma::store_matrix_sync(out + n * kTile, accumulator, out_ld, wmma::mem_row_major);
  }
}

// accumulators[n] += a (16 x kStep) b (kStep x kHead), b row-major; one warp.
template <int kHead>
__device__ void warp_accumulate(Accumulator (&accumulators)[kHead / kTile], const bf16* a, int a_ld,
                                const bf16* b, int b_ld) {
#pragma unroll
  for (int n = 0; n < kHead / kTile; ++n)
#pragma unroll
    for (int kk = 0; kk < kStep / kTile; ++kk) {
      FragmentA a_part;
      FragmentB b_part;
      wmma::load_matrix_sync(a_part, a + kk * kTile, a_ld);
      wmma::load_matrix_sync(b_part, b + kk * kTile * b_ld + n * kTile, b_ld);
      wmma::mma_sync(accumulators[n], a_part, b_part, accumulators[n]);
    }
}

// Writes a warp's 16 rows of results (accumulators) into columns [column, column + kHead) of rows
// first_row.. of a (rows, ld) fp32 matrix and its bf16 copy, through shared staging.
template <int kHead>
__device__ void warp_store_rows(float* stage, const Accumulator (&accumulators)[kHead / kTile],
                                float* out, bf16* out_bf16, size_t ld, int first_row, int limit) {
  constexpr int kStageRow = Strides<kHead>::kOutRow;
#pragma unroll
  for (int n = 0; n < kHead / kTile; ++n)
    wmma::store_matrix_sync(stage + n * kTile, accumulators[n], kStageRow, wmma::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x % kWarpSize;
  for (int e = lane; e < kTile * kHead; e += kWarpSize) {
    const int r = e / kHead, d = e % kHead, row = first_row + r;
    if (row >= limit) continue;
    const float value = stage[r * kStageRow + d];
    out[size_t(row) * ld + d] = value;
    if (out_bf16) out_bf16[size_t(row) * ld + d] = __float2bfloat16(value);
  }
  __syncwarp();
}

// lse (times log2(e), for exp2_approx) and D of query rows first.. first + kRows - 1 of head bh
// into shared memory; past T, an lse of infinity makes every probability of the row 0.
template <int kHead>
__device__ void load_row_statistics(BackwardTiles<kHead>& tiles, const AttentionBackwardArgs& args,
                                    int bh, int first, int T) {
  for (int r = threadIdx.x; r < kRows; r += blockDim.x) {
    const int i = first + r;
    tiles.lse[r] = i < T ? args.lse[size_t(bh) * T + i] * kLog2e : INFINITY;
    tiles.row_dot[r] = i < T ? args.row_dot[size_t(bh) * T + i] : 0.0f;
  }
}

// ---- forward ------------------------------------------------------------------------------------

// One step of the online softmax for a warp's 16 rows, against keys j0.. j0 + kStep - 1: takes
// the scores from tiles.score, writes the dropped, unnormalised probabilities (bf16) for the
// product with v, and rescales the running sums and outputs to the new row maxima.
template <int kHead>
__device__ void online_softmax_step(ForwardTiles<kHead>& tiles, int row0, int first_row, int j0,
                                    float scale, const DropoutSpec& spec, int b, int h, int T) {
  using S = Strides<kHead>;
  constexpr int kKeysPerLane = kStep / kLanesPerRow;
  const int lane = threadIdx.x % kWarpSize;
  const int r = row0 + lane / kLanesPerRow, part = lane % kLanesPerRow;
  const int i = first_row + r;
  const float* score = tiles.score + r * S::kScoreRow;
  bf16* prob = tiles.prob + r * S::kProbRow;
  const int first_key = part * kKeysPerLane;

  float step_max = -INFINITY;
  for (int u = 0; u < kKeysPerLane; ++u) {
    const int jj = first_key + u;
    if (j0 + jj <= i) step_max = fmaxf(step_max, score[jj] * scale);
  }
  step_max = group_max<kLanesPerRow>(step_max);
  const float old_max = tiles.row_max[r];
  const float new_max = fmaxf(old_max, step_max);
  const float subtract = new_max == -INFINITY ? 0.0f : new_max;  // a row that saw no key yet
  const float correction = expf(old_max - subtract);
  DropoutCursor mask(spec, static_cast<uint32_t>(b));
  const uint64_t mask_row = (uint64_t(h) * T + i) * T + j0;
  float step_sum = 0.0f;
  for (int u = 0; u < kKeysPerLane; ++u) {
    const int jj = first_key + u;
    float p = j0 + jj <= i ? expf(score[jj] * scale - subtract) : 0.0f;
    step_sum += p;  // the softmax normalises before dropout
    if (spec.active() && p > 0.0f) p *= mask.multiplier(mask_row + jj);
    prob[jj] = __float2bfloat16(p);
  }
  step_sum = group_sum<kLanesPerRow>(step_sum);
  __syncwarp();  // every lane has read row_max before it changes
  if (part == 0) {
    tiles.row_max[r] = new_max;
    tiles.row_sum[r] = tiles.row_sum[r] * correction + step_sum;
  }
  for (int d = part; d < kHead; d += kLanesPerRow) tiles.out[r * S::kOutRow + d] *= correction;
}


template <int kHead>
__global__ void __launch_bounds__(kThreads) flash_forward_bf16_kernel(AttentionForwardArgs args) {
  using S = Strides<kHead>;
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  ForwardTiles<kHead>& tiles = *reinterpret_cast<ForwardTiles<kHead>*>(shared_bytes);
  const ForwardBlock block = forward_block(args);
  const auto& [s, A, ld, head, first_row, last_row, warp, lane, row0, spec] = block;

  load_rows<kHead, kRows>(tiles.q, S::kHeadRow, head.q, ld, first_row, s.T);
  for (int e = lane; e < kTile * kHead; e += kWarpSize)
    tiles.out[(row0 + e / kHead) * S::kOutRow + e % kHead] = 0.0f;
  if (lane < kTile) {
    tiles.row_max[row0 + lane] = -INFINITY;
    tiles.row_sum[row0 + lane] = 0.0f;
  }

  for (int j0 = 0; j0 <= last_row; j0 += kStep) {
    if (!load_key_step<kHead>(tiles.k, tiles.v, block, j0)) continue;
    warp_product<FragmentBTransposed, kHead, kStep>(tiles.score + row0 * S::kScoreRow, S::kScoreRow,
                                                    tiles.q + row0 * S::kHeadRow, S::kHeadRow,
                                                    tiles.k, S::kHeadRow);
    __syncwarp();
    online_softmax_step<kHead>(tiles, row0, first_row, j0, head.scale, spec, head.b, head.h, s.T);
    __syncwarp();
    // out += p v, on the rows the softmax step just rescaled in shared memory
    float* out = tiles.out + row0 * S::kOutRow;
    Accumulator accumulators[kHead / kTile];
#pragma unroll
    for (int n = 0; n < kHead / kTile; ++n)
      wmma::load_matrix_sync(accumulators[n], out + n * kTile, S::kOutRow, wmma::mem_row_major);
    warp_accumulate<kHead>(accumulators, tiles.prob + row0 * S::kProbRow, S::kProbRow, tiles.v,
                           S::kHeadRow);
#pragma unroll
    for (int n = 0; n < kHead / kTile; ++n)
      wmma::store_matrix_sync(out + n * kTile, accumulators[n], S::kOutRow, wmma::mem_row_major);
  }
  __syncwarp();
  for (int e = lane; e < kTile * kHead; e += kWarpSize) {
    const int r = row0 + e / kHead, d = e % kHead, i = first_row + r;
    if (i >= s.T) continue;
    const float o = tiles.out[r * S::kOutRow + d] / tiles.row_sum[r];
    const size_t offset = (size_t(head.b) * s.T + i) * A + head.h * kHead + d;
    args.out[offset] = o;
    args.out_copy[offset] = o;
    if (args.out_bf16) args.out_bf16[offset] = __float2bfloat16(o);
  }
  if (lane < kTile && first_row + row0 + lane < s.T)
    args.lse[size_t(head.bh) * s.T + first_row + row0 + lane] =
        tiles.row_max[row0 + lane] + logf(tiles.row_sum[row0 + lane]);
}


// ---- backward -----------------------------------------------------------------------------------
// p = exp(s scale - lse), m the dropout multiplier, dp = dout . v, D = dout . out:
//   dv += (p m)^T dout,   ds = p (dp m - D) scale,   dk += ds^T q,   dq += ds k.

// dk and dv for the block's 64 keys, over the query steps that see them.
template <int kHead>
__global__ void __launch_bounds__(kThreads)
    flash_backward_keys_bf16_kernel(AttentionBackwardArgs args) {
  using S = Strides<kHead>;
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  BackwardTiles<kHead>& tiles = *reinterpret_cast<BackwardTiles<kHead>*>(shared_bytes);
  const AttentionShape s = args.shape;
  const int A = s.width(), ld = 3 * A;
  const HeadBlock head = head_block(s, args.qkv, args.dout);
  const int first_key = blockIdx.x * kRows;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int row0 = warp * kTile;  // the warp's 16 keys within the block
  const DropoutSpec spec = args.dropout.resolve();
  DropoutCursor mask(spec, static_cast<uint32_t>(head.b));
  const float scale_log2 = head.scale * kLog2e;

  load_rows<kHead, kRows>(tiles.own_a, S::kHeadRow, head.q + A, ld, first_key, s.T);
  load_rows<kHead, kRows>(tiles.own_b, S::kHeadRow, head.q + 2 * A, ld, first_key, s.T);
  Accumulator dk[kHead / kTile], dv[kHead / kTile];
#pragma unroll
  for (int n = 0; n < kHead / kTile; ++n) {
    wmma::fill_fragment(dk[n], 0.0f);
    wmma::fill_fragment(dv[n], 0.0f);
  }

  // Each lane takes 4 consecutive keys (one Philox block of the mask) and every 8th query.
  constexpr int kQueryLanes = kWarpSize / (kTile / 4);
  const int key_quad = lane % (kTile / 4), query_lane = lane / (kTile / 4);
  for (int i0 = first_key; i0 < s.T; i0 += kStep) {  // queries before first_key see no key here
    __syncthreads();
    load_rows<kHead, kStep>(tiles.step_a, S::kHeadRow, head.q, ld, i0, s.T);
    load_rows<kHead, kStep>(tiles.step_b, S::kHeadRow, head.dout, A, i0, s.T);
    load_row_statistics(tiles, args, head.bh, i0, s.T);
    __syncthreads();
    // s^T = k q^T and dp^T = v dout^T, for this warp's 16 keys and the step's queries
    warp_product<FragmentBTransposed, kHead, kStep>(tiles.score + row0 * S::kScoreRow, S::kScoreRow,
                                                    tiles.own_a + row0 * S::kHeadRow, S::kHeadRow,
                                                    tiles.step_a, S::kHeadRow);
    warp_product<FragmentBTransposed, kHead, kStep>(tiles.dprob + row0 * S::kScoreRow, S::kScoreRow,
                                                    tiles.own_b + row0 * S::kHeadRow, S::kHeadRow,
                                                    tiles.step_b, S::kHeadRow);
    __syncwarp();
    for (int u = 0; u < kStep / kQueryLanes; ++u) {
      const int c = query_lane + kQueryLanes * u, i = i0 + c;
      const float lse = tiles.lse[c], row_dot = tiles.row_dot[c];
      for (int q = 0; q < 4; ++q) {
        const int kr = row0 + 4 * key_quad + q, j = first_key + kr;
        const bool visible = j <= i && i < s.T;
        const float p =
            visible ? exp2_approx(tiles.score[kr * S::kScoreRow + c] * scale_log2 - lse) : 0.0f;
        const float m = spec.active() && visible
                            ? mask.multiplier((uint64_t(head.h) * s.T + i) * s.T + j)
                            : 1.0f;
        const float dp = tiles.dprob[kr * S::kScoreRow + c];
        tiles.prob[kr * S::kProbRow + c] = __float2bfloat16(p * m);
        tiles.dscore[kr * S::kProbRow + c] = __float2bfloat16(p * (dp * m - row_dot) * head.scale);
      }
    }
    __syncwarp();
    warp_accumulate<kHead>(dv, tiles.prob + row0 * S::kProbRow, S::kProbRow, tiles.step_b,
                           S::kHeadRow);
    warp_accumulate<kHead>(dk, tiles.dscore + row0 * S::kProbRow, S::kProbRow, tiles.step_a,
                           S::kHeadRow);
  }
  __syncthreads();  // the score tiles become staging for the results
  float* stage = tiles.score + row0 * S::kOutRow;
  const size_t head_offset = size_t(head.b) * s.T * ld + head.h * kHead;
  float* dqkv = args.dqkv + head_offset;
  bf16* dqkv_bf16 = args.dqkv_bf16 ? args.dqkv_bf16 + head_offset : nullptr;
  warp_store_rows<kHead>(stage, dk, dqkv + A, dqkv_bf16 ? dqkv_bf16 + A : nullptr, ld,
                         first_key + row0, s.T);
  warp_store_rows<kHead>(stage, dv, dqkv + 2 * A, dqkv_bf16 ? dqkv_bf16 + 2 * A : nullptr, ld,
                         first_key + row0, s.T);
}

// dq for the block's 64 queries, over the key steps they see.
template <int kHead>
__global__ void __launch_bounds__(kThreads)
    flash_backward_queries_bf16_kernel(AttentionBackwardArgs args) {
  using S = Strides<kHead>;
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  BackwardTiles<kHead>& tiles = *reinterpret_cast<BackwardTiles<kHead>*>(shared_bytes);
  const AttentionShape s = args.shape;
  const int A = s.width(), ld = 3 * A;
  const HeadBlock head = head_block(s, args.qkv, args.dout);
  const int first_row = blockIdx.x * kRows;
  const int last_row = min(s.T - 1, first_row + kRows - 1);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int row0 = warp * kTile;
  const DropoutSpec spec = args.dropout.resolve();
  DropoutCursor mask(spec, static_cast<uint32_t>(head.b));
  const float scale_log2 = head.scale * kLog2e;

  load_rows<kHead, kRows>(tiles.own_a, S::kHeadRow, head.q, ld, first_row, s.T);
  load_rows<kHead, kRows>(tiles.own_b, S::kHeadRow, head.dout, A, first_row, s.T);
  load_row_statistics(tiles, args, head.bh, first_row, s.T);
  Accumulator dq[kHead / kTile];
#pragma unroll
  for (int n = 0; n < kHead / kTile; ++n) wmma::fill_fragment(dq[n], 0.0f);

  constexpr int kKeysPerLane = kStep / kLanesPerRow;
  const int r = row0 + lane / kLanesPerRow, part = lane % kLanesPerRow;
  const int i = first_row + r;
  for (int j0 = 0; j0 <= last_row; j0 += kStep) {
    __syncthreads();
    load_rows<kHead, kStep>(tiles.step_a, S::kHeadRow, head.q + A, ld, j0, s.T);
    load_rows<kHead, kStep>(tiles.step_b, S::kHeadRow, head.q + 2 * A, ld, j0, s.T);
    __syncthreads();
    if (first_row + row0 + kTile - 1 < j0) continue;
    // s = q k^T and dp = dout v^T for this warp's 16 queries and the step's keys
    warp_product<FragmentBTransposed, kHead, kStep>(tiles.score + row0 * S::kScoreRow, S::kScoreRow,
                                                    tiles.own_a + row0 * S::kHeadRow, S::kHeadRow,
                                                    tiles.step_a, S::kHeadRow);
    warp_product<FragmentBTransposed, kHead, kStep>(tiles.dprob + row0 * S::kScoreRow, S::kScoreRow,
                                                    tiles.own_b + row0 * S::kHeadRow, S::kHeadRow,
                                                    tiles.step_b, S::kHeadRow);
    __syncwarp();
    const float lse = tiles.lse[r], row_dot = tiles.row_dot[r];
    const uint64_t mask_row = (uint64_t(head.h) * s.T + i) * s.T + j0;
    for (int u = 0; u < kKeysPerLane; ++u) {
      const int jj = part * kKeysPerLane + u;
      const bool visible = j0 + jj <= i && i < s.T;
      const float p =
          visible ? exp2_approx(tiles.score[r * S::kScoreRow + jj] * scale_log2 - lse) : 0.0f;
      const float m = spec.active() && visible ? mask.multiplier(mask_row + jj) : 1.0f;
      const float dp = tiles.dprob[r * S::kScoreRow + jj];
      tiles.dscore[r * S::kProbRow + jj] = __float2bfloat16(p * (dp * m - row_dot) * head.scale);
    }
    __syncwarp();
    warp_accumulate<kHead>(dq, tiles.dscore + row0 * S::kProbRow, S::kProbRow, tiles.step_a,
                           S::kHeadRow);
  }
  __syncthreads();
  const size_t head_offset = size_t(head.b) * s.T * ld + head.h * kHead;
  float* dqkv = args.dqkv + head_offset;
  bf16* dqkv_bf16 = args.dqkv_bf16 ? args.dqkv_bf16 + head_offset : nullptr;
  warp_store_rows<kHead>(tiles.score + row0 * S::kOutRow, dq, dqkv, dqkv_bf16, ld, first_row + row0,
                         s.T);
}


}  // namespace

bool tensor_core_attention_supports(int head_size) {
  return head_size == 16 || head_size == 32 || head_size == 64 || head_size == 128;
}

void flash_attention_forward_bf16(const AttentionForwardArgs& args, cudaStream_t stream) {
  with_head_size(args.shape.head_size, [&](auto head) {
    constexpr int kHead = decltype(head)::value;
    launch_with_shared(flash_forward_bf16_kernel<kHead>,
                       grid_for(args.shape.T - args.q_start, args.shape),
                       sizeof(ForwardTiles<kHead>), stream, args, "flash_forward_bf16");
  });
}


void flash_attention_backward_bf16(const AttentionBackwardArgs& args, cudaStream_t stream) {
  with_head_size(args.shape.head_size, [&](auto head) {
    constexpr int kHead = decltype(head)::value;
    const dim3 grid = grid_for(args.shape.T, args.shape);
    launch_with_shared(flash_backward_keys_bf16_kernel<kHead>, grid, sizeof(BackwardTiles<kHead>),
                       stream, args, "flash_backward_keys_bf16");
    launch_with_shared(flash_backward_queries_bf16_kernel<kHead>, grid,
                       sizeof(BackwardTiles<kHead>), stream, args, "flash_backward_queries_bf16");
  });
}

}  // namespace folio::cuda
