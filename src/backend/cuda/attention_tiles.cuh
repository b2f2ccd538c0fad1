// What the tensor-core attention kernels share (attention_flash_bf16.cu: WMMA fragments through
// shared memory; attention_registers.cu: mma.sync with the scores in registers): the block shape,
// padded tile strides, the loads of fp32 rows into bf16 tiles, the forward blocks' set-up and the
// launchers. A block is kWarps warps; each warp owns kTile (16) of the block's kRows rows and
// steps through kStep rows of the other side at a time.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/cuda_memory.h"
#include "core/error.h"

namespace folio::cuda {

constexpr int kTile = 16;  // a warp's rows; WMMA's m, n and k
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kRows = kWarps * kTile;  // the block's own rows
constexpr int kStep = 64;              // rows of the other side per step
static_assert(kWarpSize % kTile == 0 && kStep % kTile == 0);

// Leading dimensions, padded so that rows start on different banks (and stay multiples of 16
// bytes, as WMMA needs).
template <int kHead>
struct Strides {
  static constexpr int kHeadRow = kHead + 8;   // bf16 rows of q, k, v, dout
  static constexpr int kScoreRow = kStep + 4;  // fp32 scores
  static constexpr int kProbRow = kStep + 8;   // bf16 probabilities, score gradients
  static constexpr int kOutRow = kHead + 4;    // fp32 outputs and result staging
};

// The order of the rows in a tile: row `offset` of those loaded goes to tile row
// RowOrder::tile_row(offset). The WMMA kernels keep the rows in order; the register kernels
// (attention_registers.cu) interleave them within groups of 16 so that each thread's scores
// fall on consecutive keys, and their dropout multipliers in one Philox block.
struct InOrder {
  __host__ __device__ static constexpr int tile_row(int offset) { return offset; }
};

// Four floats of loaded row `offset`, from column `column`, rounded to bf16 into the tile row
// RowOrder puts that row at (4-byte aligned: tile_ld is even, and so is the column).
template <typename RowOrder>
__device__ __forceinline__ void store_quad_as_bf16(bf16* tile, int tile_ld, int offset, int column,
                                                   float4 values) {
  auto* out =
      reinterpret_cast<__nv_bfloat162*>(tile + RowOrder::tile_row(offset) * tile_ld + column);
  out[0] = __floats2bfloat162_rn(values.x, values.y);
  out[1] = __floats2bfloat162_rn(values.z, values.w);
}

// Rows first.. first + kCount - 1 of an fp32 matrix (row stride `ld`) into a bf16 tile, in the
// order RowOrder gives; rows at or past `limit` are zero. Each thread issues all its loads before
// it converts and stores any: a loop that stored each value before loading the next waited out one
// global-memory latency per element, and so did the whole kernel (on an H200, attention took 12 of
// shakespeare_char's 18.5 ms a step). Four floats a load when the rows are 16-byte aligned
// (cudaMalloc'd activations at a head offset of a multiple of 4 are), else four single loads, still
// all issued first.
template <int kHead, int kCount, typename RowOrder, bool kVectors>
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
      store_quad_as_bf16<RowOrder>(tile, tile_ld, e / kQuadsPerRow, 4 * (e % kQuadsPerRow),
                                   values[u]);
    }
  }
}

template <int kHead, int kCount, typename RowOrder = InOrder>
__device__ void load_rows(bf16* tile, int tile_ld, const float* source, size_t ld, int first,
                          int limit) {
  if ((reinterpret_cast<uintptr_t>(source) | (ld * sizeof(float))) % 16 == 0) {
    load_rows_as<kHead, kCount, RowOrder, true>(tile, tile_ld, source, ld, first, limit);
  } else {
    load_rows_as<kHead, kCount, RowOrder, false>(tile, tile_ld, source, ld, first, limit);
  }
}

// ---- loads staged through shared memory (FOLIO_ATTENTION_*=staged) -----------------------------
// load_rows holds a step's rows in registers from load to store, and the block computes nothing
// until they arrive: on an H200 ncu put a third of the register kernels' stalled cycles on
// these loads (the kernels keep 2-3 warps a scheduler, too few to hide them). The staged
// variant copies the next step's fp32 rows into shared memory with cp.async (sm_80 on), which
// needs no registers to wait in, while the block computes on the current step; at the next step
// it rounds them from shared memory into the bf16 tiles. It costs 32 KiB of shared memory a block
// at head size 64, so the register kernels stage only heads up to 64.
template <int kHead>
struct StagedRows {
  alignas(16) float a[kStep * kHead];  // dense rows, as copied
  alignas(16) float b[kStep * kHead];
  float lse[kStep], row_dot[kStep];  // the dk/dv kernel's per-query values
};

// cp.async of 16 or 4 bytes from global to shared memory; with `copy` false it writes zeros and
// reads nothing (its source size is 0), for rows past the end.
__device__ __forceinline__ void copy_async_16(void* shared, const void* global, bool copy) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global),
               "r"(copy ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void copy_async_4(void* shared, const void* global, bool copy) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(address), "l"(global),
               "r"(copy ? 4 : 0)
               : "memory");
}
// The copies issued since the last call form one group (the next wait waits for it).
__device__ __forceinline__ void commit_copies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits for every copy this thread issued, then for every thread of the block: the staged rows
// are then all there, and every warp is done with what it computed before.
__device__ __forceinline__ void wait_for_staged_rows() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  __syncthreads();
}

// Issues the copies of rows first.. first + kCount - 1 of an fp32 matrix (row stride ld) into
// `stage` (kCount dense rows of kHead floats); rows at or past `limit` are zeros. Sixteen bytes a
// copy when the rows are 16-byte aligned, else four. A thread copies the same four columns of
// every kPass-th row, stepping one pointer: the forward kernel spilled when its sixteen addresses
// were each worked out ahead (the compiler kept them across the step's products).
template <int kHead, int kCount, bool kVectors>
__device__ void stage_rows_as(float* stage, const float* source, size_t ld, int first, int limit) {
  constexpr int kQuadsPerRow = kHead / 4;
  constexpr int kPass = kThreads / kQuadsPerRow;  // rows copied by all threads at once
  static_assert(kThreads % kQuadsPerRow == 0 && kCount % kPass == 0);
  const int column = 4 * (threadIdx.x % kQuadsPerRow), offset = threadIdx.x / kQuadsPerRow;
  const float* p = source + size_t(first + offset) * ld + column;
  float* out = stage + offset * kHead + column;
#pragma unroll 1
  for (int row = first + offset; row < first + kCount; row += kPass) {
    const bool copy = row < limit;
    const float* from = copy ? p : source;  // reads nothing past the end
    if constexpr (kVectors) {
      copy_async_16(out, from, copy);
    } else {
#pragma unroll
      for (int c = 0; c < 4; ++c) copy_async_4(out + c, copy ? from + c : from, copy);
    }
    p += kPass * ld;
    out += kPass * kHead;
  }
}

template <int kHead, int kCount>
__device__ void stage_rows(float* stage, const float* source, size_t ld, int first, int limit) {
  if ((reinterpret_cast<uintptr_t>(source) | (ld * sizeof(float))) % 16 == 0) {
    stage_rows_as<kHead, kCount, true>(stage, source, ld, first, limit);
  } else {
    stage_rows_as<kHead, kCount, false>(stage, source, ld, first, limit);
  }
}

// The kCount staged rows rounded to bf16 into a tile, in the order RowOrder gives (after
// wait_for_staged_rows).
template <int kHead, int kCount, typename RowOrder = InOrder>
__device__ void round_staged_rows(bf16* tile, int tile_ld, const float* stage) {
  constexpr int kQuadsPerRow = kHead / 4;
#pragma unroll
  for (int u = 0; u < kCount * kQuadsPerRow / kThreads; ++u) {
    const int e = threadIdx.x + u * kThreads, offset = e / kQuadsPerRow;
    const int column = 4 * (e % kQuadsPerRow);
    store_quad_as_bf16<RowOrder>(tile, tile_ld, offset, column,
                                 *reinterpret_cast<const float4*>(stage + offset * kHead + column));
  }
}

// A step of two row sets (keys and values; or queries and output gradients) staged: the copies
// of rows first.. first + kStep - 1 of each, issued now as one group.
template <int kHead>
__device__ void stage_step(StagedRows<kHead>& stage, const float* a, size_t lda, const float* b,
                           size_t ldb, int first, int limit) {
  stage_rows<kHead, kStep>(stage.a, a, lda, first, limit);
  stage_rows<kHead, kStep>(stage.b, b, ldb, first, limit);
  commit_copies();
}

// Waits for the staged step and rounds its two row sets into the tiles, in the order RowOrder
// gives; the caller adds what else the step needs, then a __syncthreads() before any warp reads
// the tiles and before the next step's copies overwrite the stage.
template <int kHead, typename RowOrder>
__device__ void take_staged_step(bf16* a_tile, bf16* b_tile, const StagedRows<kHead>& stage) {
  wait_for_staged_rows();
  round_staged_rows<kHead, kStep, RowOrder>(a_tile, Strides<kHead>::kHeadRow, stage.a);
  round_staged_rows<kHead, kStep, RowOrder>(b_tile, Strides<kHead>::kHeadRow, stage.b);
}

// Where a kernel's StagedRows lie in its dynamic shared memory: after its tiles, and the bytes
// to launch it with.
inline constexpr int kLargestStagedHead = 64;
template <typename Tiles>
__host__ __device__ constexpr size_t staged_rows_offset() {
  return (sizeof(Tiles) + 127) / 128 * 128;
}
template <typename Tiles, int kHead, bool kStaged>
constexpr size_t shared_bytes_of() {
  return kStaged ? staged_rows_offset<Tiles>() + sizeof(StagedRows<kHead>) : sizeof(Tiles);
}
template <typename Tiles, int kHead>
__device__ StagedRows<kHead>& staged_rows_of(unsigned char* shared_bytes) {
  return *reinterpret_cast<StagedRows<kHead>*>(shared_bytes + staged_rows_offset<Tiles>());
}

// ---- exponentials in base 2 --------------------------------------------------------------------
// The register kernels, and the WMMA ones' backward, take exponentials in base 2 (scores scaled
// by scale log2(e), log-sum-exps by log2(e)): one MUFU.EX2 an element, where expf's accurate path
// took eight instructions. Its relative error, about 2^-22, is far below the bf16 operands'
// 2^-9. The saved log-sum-exp stays in natural log, whichever kernel saves or reads it.
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// 2^x (0 for -inf), flushing results below 2^-126 to zero: a probability that small adds nothing
// to a row whose largest probability is 1.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
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

// Keys and values j0.. j0 + kStep - 1 of the block's head into shared memory (as bf16, in the
// order KeyOrder gives), once every warp is done with the last ones; whether the calling warp has
// rows that see any of them.
template <int kHead, typename KeyOrder = InOrder>
__device__ bool load_key_step(bf16* k, bf16* v, const ForwardBlock& block, int j0) {
  using S = Strides<kHead>;
  __syncthreads();
  load_rows<kHead, kStep, KeyOrder>(k, S::kHeadRow, block.head.q + block.A, block.ld, j0,
                                    block.s.T);
  load_rows<kHead, kStep, KeyOrder>(v, S::kHeadRow, block.head.q + 2 * block.A, block.ld, j0,
                                    block.s.T);
  __syncthreads();
  return block.first_row + block.row0 + kTile - 1 >= j0;
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

inline dim3 grid_for(int rows, const AttentionShape& s) {
  if (size_t(s.B) * s.H > 65535) throw Error("attention: batch_size * n_head above 65535");
  return dim3(blocks_for(rows, kRows), s.B * s.H);
}

}  // namespace folio::cuda
