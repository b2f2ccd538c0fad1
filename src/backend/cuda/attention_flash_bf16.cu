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
#include "backend/cuda/cuda_memory.h"
#include "core/error.h"

namespace folio::cuda {

namespace {

namespace wmma = nvcuda::wmma;

constexpr int kTile = 16;  // WMMA's m, n and k
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kRows = kWarps * kTile;            // the block's own rows
constexpr int kStep = 64;                        // rows of the other side per step
constexpr int kLanesPerRow = kWarpSize / kTile;  // lanes sharing one of a warp's 16 rows
static_assert(kWarpSize % kTile == 0 && kStep % kTile == 0);

using FragmentA = wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, bf16, wmma::row_major>;
using FragmentB = wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, bf16, wmma::row_major>;
using FragmentBTransposed =
    wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, bf16, wmma::col_major>;
using Accumulator = wmma::fragment<wmma::accumulator, kTile, kTile, kTile, float>;

// Leading dimensions, padded so that rows start on different banks (and stay multiples of 16
// bytes, as WMMA needs).
template <int kHead>
struct Strides {
  static constexpr int kHeadRow = kHead + 8;   // bf16 rows of q, k, v, dout
  static constexpr int kScoreRow = kStep + 4;  // fp32 scores
  static constexpr int kProbRow = kStep + 8;   // bf16 probabilities, score gradients
  static constexpr int kOutRow = kHead + 4;    // fp32 outputs and result staging
};

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
  float lse[kRows], row_dot[kRows];  // of the query rows (own in dq, the step's in dk/dv)
  static_assert(kRows == kStep);
  static_assert(kRows * S::kOutRow <= 2 * kRows * S::kScoreRow);
};

// Rows first.. first + kCount - 1 of an fp32 matrix (row stride `ld`) into a bf16 tile; rows at
// or past `limit` are zero. Each thread issues all its loads before it converts and stores any:
// a loop that stored each value before loading the next waited out one global-memory latency per
// element, and so did the whole kernel (on an H200, attention took 12 of shakespeare_char's 18.5
// ms a step). Four floats a load when the rows are 16-byte aligned (cudaMalloc'd activations at a
// head offset of a multiple of 4 are), else four single loads, still all issued first.
template <int kHead, int kCount, bool kVectors>
__device__ void load_rows_as(bf16* tile, int tile_ld, const float* source, size_t ld, int first,
                             int limit) {
  constexpr int kQuadsPerRow = kHead / 4;
  constexpr int kPerThread = kCount * kQuadsPerRow / kThreads;
  static_assert(kCount * kQuadsPerRow % kThreads == 0);
  // At most 8 loads (32 registers) in flight a thread, 4 for head size 128, whose kernels hold
  // twice the accumulators (they spilled with 8 or 16).
  constexpr int kMostInFlight = kHead >= 128 ? 4 : 8;
  constexpr int kBatch = kPerThread < kMostInFlight ? kPerThread : kMostInFlight;
  static_assert(kPerThread % kBatch == 0);
#pragma unroll
  for (int base = 0; base < kPerThread; base += kBatch) {
    float4 values[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int e = threadIdx.x + (base + u) * kThreads, row = first + e / kQuadsPerRow;
      const float* p = source + size_t(row) * ld + 4 * (e % kQuadsPerRow);
      if (row >= limit) {
        values[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      } else if constexpr (kVectors) {
        values[u] = __ldg(reinterpret_cast<const float4*>(p));
      } else {
        values[u] = make_float4(__ldg(p), __ldg(p + 1), __ldg(p + 2), __ldg(p + 3));
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int e = threadIdx.x + (base + u) * kThreads;
      // 4-byte aligned: tile_ld is even, and so is the column.
      auto* out = reinterpret_cast<__nv_bfloat162*>(tile + (e / kQuadsPerRow) * tile_ld +
                                                    4 * (e % kQuadsPerRow));
      out[0] = __floats2bfloat162_rn(values[u].x, values[u].y);
      out[1] = __floats2bfloat162_rn(values[u].z, values[u].w);
    }
  }
}

template <int kHead, int kCount>
__device__ void load_rows(bf16* tile, int tile_ld, const float* source, size_t ld, int first,
                          int limit) {
  if ((reinterpret_cast<uintptr_t>(source) | (ld * sizeof(float))) % 16 == 0) {
    load_rows_as<kHead, kCount, true>(tile, tile_ld, source, ld, first, limit);
  } else {
    load_rows_as<kHead, kCount, false>(tile, tile_ld, source, ld, first, limit);
  }
}

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

// lse and D of query rows first.. first + kRows - 1 of head bh into shared memory; past T, an lse
// of infinity makes every probability of the row 0.
template <int kHead>
__device__ void load_row_statistics(BackwardTiles<kHead>& tiles, const AttentionBackwardArgs& args,
                                    int bh, int first, int T) {
  for (int r = threadIdx.x; r < kRows; r += blockDim.x) {
    const int i = first + r;
    tiles.lse[r] = i < T ? args.lse[size_t(bh) * T + i] : INFINITY;
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

// What a forward block works on: head (b, h), its kRows query rows first_row.. last_row, and the
// calling warp's 16 of them from row0.
struct ForwardBlock {
  AttentionShape s;
  int A, ld;  // the attention width, and qkv's row stride (3A)
  HeadBlock head;
  int first_row, last_row;
  int warp, lane, row0;
  DropoutSpec spec;
};

__device__ inline ForwardBlock forward_block(const AttentionForwardArgs& args) {
  ForwardBlock f;
  f.s = args.shape;
  f.A = f.s.width();
  f.ld = 3 * f.A;
  f.head = head_block(f.s, args.qkv, nullptr);
  f.first_row = args.q_start + blockIdx.x * kRows;
  f.last_row = min(f.s.T - 1, f.first_row + kRows - 1);
  f.warp = threadIdx.x / kWarpSize;
  f.lane = threadIdx.x % kWarpSize;
  f.row0 = f.warp * kTile;
  f.spec = args.dropout.resolve();
  return f;
}

// Keys and values j0.. j0 + kStep - 1 of the block's head into shared memory (as bf16), once every
// warp is done with the last ones; whether the calling warp has rows that see any of them.
template <int kHead>
__device__ bool load_key_step(bf16* k, bf16* v, const ForwardBlock& block, int j0) {
  using S = Strides<kHead>;
  __syncthreads();
  load_rows<kHead, kStep>(k, S::kHeadRow, block.head.q + block.A, block.ld, j0, block.s.T);
  load_rows<kHead, kStep>(v, S::kHeadRow, block.head.q + 2 * block.A, block.ld, j0, block.s.T);
  __syncthreads();
  return block.first_row + block.row0 + kTile - 1 >= j0;
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

// ---- forward with the scores in registers (mma.sync) -------------------------------------------
// FlashAttention-2's arrangement, an alternative to the kernel above while it is measured
// (FOLIO_ATTENTION_FORWARD=registers picks it): each warp keeps its 16 query rows' q fragments,
// scores, probabilities and running output in registers, and only q, k and v pass through shared
// memory. The products are PTX mma.sync m16n8k16 (bf16 in, fp32 accumulators), whose fragment
// layout is documented (unlike WMMA's): with g = lane / 4 and t = lane % 4, an accumulator tile's
// registers 0, 1 hold row g, columns 2t and 2t + 1, and registers 2, 3 row g + 8; an A fragment's
// four registers hold (row g, columns 2t, 2t + 1), (row g + 8, the same), (row g, 2t + 8, 2t + 9),
// (row g + 8, the same), two bf16 each, the lower column in the lower half; a B fragment's two
// hold (rows 2t, 2t + 1 of column g) and (rows 2t + 8, 2t + 9). So the scores of two adjacent
// 8-key tiles are, as they stand, the A fragment of the product with v. Numerics as above: bf16
// operands, fp32 scores, statistics and accumulators, the row sums taken before dropout.

template <int kHead>
struct RegisterForwardTiles {
  using S = Strides<kHead>;
  alignas(16) bf16 q[kRows * S::kHeadRow];
  alignas(16) bf16 k[kStep * S::kHeadRow];
  alignas(16) bf16 v[kStep * S::kHeadRow];
};

// d += a b on the tensor cores: a 16 x 16 (A fragment), b 16 x 8 (B fragment), d 16 x 8 fp32.
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const uint32_t (&a)[4],
                                            const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Two bf16 in one register, `low` in the lower half.
__device__ __forceinline__ uint32_t packed_bf16(float low, float high) {
  return uint32_t(__bfloat16_as_ushort(__float2bfloat16(low))) |
         (uint32_t(__bfloat16_as_ushort(__float2bfloat16(high))) << 16);
}
// Two adjacent bf16 of a row in shared memory (4-byte aligned), and two of a column (rows ld
// apart).
__device__ __forceinline__ uint32_t row_pair(const bf16* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}
__device__ __forceinline__ uint32_t column_pair(const bf16* p, int ld) {
  return uint32_t(__bfloat16_as_ushort(p[0])) | (uint32_t(__bfloat16_as_ushort(p[ld])) << 16);
}

template <int kHead>
__global__ void __launch_bounds__(kThreads)
    flash_forward_registers_kernel(AttentionForwardArgs args) {
  using S = Strides<kHead>;
  constexpr int kDimSteps = kHead / 16;  // k-steps of q k^T over the head's dimensions
  constexpr int kKeyTiles = kStep / 8;   // 8-key tiles of a step's scores
  constexpr int kOutTiles = kHead / 8;   // 8-column tiles of the output
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  RegisterForwardTiles<kHead>& tiles = *reinterpret_cast<RegisterForwardTiles<kHead>*>(shared_bytes);
  const ForwardBlock block = forward_block(args);
  const auto& [s, A, ld, head, first_row, last_row, warp, lane, row0, spec] = block;
  const int g = lane / 4, t = lane % 4;
  const int rows[2] = {first_row + row0 + g, first_row + row0 + g + 8};  // this thread's two

  load_rows<kHead, kRows>(tiles.q, S::kHeadRow, head.q, ld, first_row, s.T);
  __syncthreads();
  uint32_t q[kDimSteps][4];
  const bf16* q_row = tiles.q + (row0 + g) * S::kHeadRow + 2 * t;
#pragma unroll
  for (int kk = 0; kk < kDimSteps; ++kk) {
    q[kk][0] = row_pair(q_row + kk * 16);
    q[kk][1] = row_pair(q_row + 8 * S::kHeadRow + kk * 16);
    q[kk][2] = row_pair(q_row + kk * 16 + 8);
    q[kk][3] = row_pair(q_row + 8 * S::kHeadRow + kk * 16 + 8);
  }

  float out[kOutTiles][4];
#pragma unroll
  for (int dt = 0; dt < kOutTiles; ++dt) out[dt][0] = out[dt][1] = out[dt][2] = out[dt][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};  // this thread's share of its rows' sums (columns 2t, 2t + 1)

  for (int j0 = 0; j0 <= last_row; j0 += kStep) {
    if (!load_key_step<kHead>(tiles.k, tiles.v, block, j0)) continue;

    // score = q k^T: k's rows are the B fragments' columns
    float score[kKeyTiles][4];
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt) {
      score[nt][0] = score[nt][1] = score[nt][2] = score[nt][3] = 0.0f;
      const bf16* k_row = tiles.k + (nt * 8 + g) * S::kHeadRow + 2 * t;
#pragma unroll
      for (int kk = 0; kk < kDimSteps; ++kk) {
        const uint32_t b[2] = {row_pair(k_row + kk * 16), row_pair(k_row + kk * 16 + 8)};
        mma_16x8x16(score[nt], q[kk], b);
      }
    }
    // online softmax: scaled, causal (a key after the row is -inf), the rows' new maxima
    float step_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int j = j0 + nt * 8 + 2 * t + (c & 1);
        const float value = j <= rows[c / 2] ? score[nt][c] * head.scale : -INFINITY;
        score[nt][c] = value;
        step_max[c / 2] = fmaxf(step_max[c / 2], value);
      }
    float subtract[2], correction[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float new_max = fmaxf(row_max[r], group_max<4>(step_max[r]));
      subtract[r] = new_max == -INFINITY ? 0.0f : new_max;  // a row that saw no key yet
      correction[r] = expf(row_max[r] - subtract[r]);
      row_max[r] = new_max;
      row_sum[r] *= correction[r];
    }
    // probabilities (unnormalised), summed before dropout, then dropped out: element
    // (h T + i) T + j of sample b's stream, as every backend draws it
    DropoutCursor masks[2] = {DropoutCursor(spec, static_cast<uint32_t>(head.b)),
                              DropoutCursor(spec, static_cast<uint32_t>(head.b))};
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int r = c / 2, j = j0 + nt * 8 + 2 * t + (c & 1);
        float p = expf(score[nt][c] - subtract[r]);
        row_sum[r] += p;
        if (spec.active() && p > 0.0f)
          p *= masks[r].multiplier((uint64_t(head.h) * s.T + rows[r]) * s.T + j);
        score[nt][c] = p;
      }
#pragma unroll
    for (int dt = 0; dt < kOutTiles; ++dt) {
      out[dt][0] *= correction[0];
      out[dt][1] *= correction[0];
      out[dt][2] *= correction[1];
      out[dt][3] *= correction[1];
    }
    // out += p v: two adjacent score tiles are one A fragment; v's columns the B fragments'
#pragma unroll
    for (int kc = 0; kc < kStep / 16; ++kc) {
      const uint32_t a[4] = {packed_bf16(score[2 * kc][0], score[2 * kc][1]),
                             packed_bf16(score[2 * kc][2], score[2 * kc][3]),
                             packed_bf16(score[2 * kc + 1][0], score[2 * kc + 1][1]),
                             packed_bf16(score[2 * kc + 1][2], score[2 * kc + 1][3])};
      const bf16* v_rows = tiles.v + (kc * 16 + 2 * t) * S::kHeadRow + g;
#pragma unroll
      for (int dt = 0; dt < kOutTiles; ++dt) {
        const uint32_t b[2] = {column_pair(v_rows + dt * 8, S::kHeadRow),
                               column_pair(v_rows + 8 * S::kHeadRow + dt * 8, S::kHeadRow)};
        mma_16x8x16(out[dt], a, b);
      }
    }
  }

  // out / sum, its saved copy and bf16 copy, and each row's log-sum-exp
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float total = group_sum<4>(row_sum[r]);
    const int i = rows[r];
    if (i >= s.T) continue;
    const size_t row_offset = (size_t(head.b) * s.T + i) * A + head.h * kHead + 2 * t;
#pragma unroll
    for (int dt = 0; dt < kOutTiles; ++dt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const size_t offset = row_offset + dt * 8 + e;
        const float o = out[dt][2 * r + e] / total;
        args.out[offset] = o;
        args.out_copy[offset] = o;
        if (args.out_bf16) args.out_bf16[offset] = __float2bfloat16(o);
      }
    if (t == 0) args.lse[size_t(head.bh) * s.T + i] = row_max[r] + logf(total);
  }
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
            visible ? expf(tiles.score[kr * S::kScoreRow + c] * head.scale - lse) : 0.0f;
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
      const float p = visible ? expf(tiles.score[r * S::kScoreRow + jj] * head.scale - lse) : 0.0f;
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

template <typename Launch>
void with_head_size(int head_size, Launch&& launch) {
  switch (head_size) {
    case 16:
      return launch(std::integral_constant<int, 16>{});
    case 32:
      return launch(std::integral_constant<int, 32>{});
    case 64:
      return launch(std::integral_constant<int, 64>{});
    case 128:
      return launch(std::integral_constant<int, 128>{});
    default:
      throw Error("internal: no tensor-core attention for head size " + std::to_string(head_size));
  }
}

// Launches `kernel` with `shared` bytes of dynamic shared memory (above the default 48 KiB).
template <typename Args>
void launch_with_shared(void (*kernel)(Args), dim3 grid, size_t shared, cudaStream_t stream,
                        const Args& args, const char* name) {
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(shared)),
             name);
  kernel<<<grid, kThreads, shared, stream>>>(args);
  check_launch(name);
}

dim3 grid_for(int rows, const AttentionShape& s) {
  if (size_t(s.B) * s.H > 65535) throw Error("attention: batch_size * n_head above 65535");
  return dim3(blocks_for(rows, kRows), s.B * s.H);
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

void flash_attention_forward_registers(const AttentionForwardArgs& args, cudaStream_t stream) {
  with_head_size(args.shape.head_size, [&](auto head) {
    constexpr int kHead = decltype(head)::value;
    launch_with_shared(flash_forward_registers_kernel<kHead>,
                       grid_for(args.shape.T - args.q_start, args.shape),
                       sizeof(RegisterForwardTiles<kHead>), stream, args,
                       "flash_forward_registers");
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
