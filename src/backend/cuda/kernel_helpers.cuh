// What every kernel file of the CUDA backend shares: the warp width and the shuffles built on
// it, block reductions in a fixed order (so sums are bit-reproducible run to run), bf16 storage,
// launch sizes, and the dropout mask as kernels draw it.
//
// HIP: this header is the one place that knows the warp (wavefront) width and the shuffle
// intrinsics. Kernels size their thread groups from kWarpSize and reduce through warp_sum() and
// warp_max(); a HIP build sets kWarpSize to the wavefront width (64 on CDNA) and maps the
// shuffles here. Shuffles inside a group of `width` lanes (width dividing kWarpSize) stay inside
// the group because the xor offsets are below `width`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "core/dropout_mask.h"

namespace folio::cuda {

using bf16 = __nv_bfloat16;

// An element read as fp32 from an fp32 tensor or from a bf16 one (a tensor or copy that products
// read in bf16), so that one kernel template serves both.
__device__ __forceinline__ float as_float(float x) {
  return x;
}
__device__ __forceinline__ float as_float(bf16 x) {
  return __bfloat162float(x);
}

// Threads that run in lockstep and exchange registers by shuffles.
inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullWarpMask = 0xffffffffu;

// Threads per block of the element-wise and row-wise kernels: 8 warps.
inline constexpr int kBlockThreads = 8 * kWarpSize;

template <typename Value>
__device__ __forceinline__ Value shuffle_xor(Value value, int lane_mask) {
  return __shfl_xor_sync(kFullWarpMask, value, lane_mask);
}

// Sum and maximum over groups of `width` consecutive lanes (width a power of two dividing the
// warp); every lane of a group gets its group's result.
template <int width = kWarpSize, typename Value>
__device__ __forceinline__ Value group_sum(Value value) {
  for (int offset = width / 2; offset > 0; offset /= 2) value += shuffle_xor(value, offset);
  return value;
}
template <int width = kWarpSize>
__device__ __forceinline__ float group_max(float value) {
  for (int offset = width / 2; offset > 0; offset /= 2)
    value = fmaxf(value, shuffle_xor(value, offset));
  return value;
}
template <typename Value>
__device__ __forceinline__ Value warp_sum(Value value) {
  return group_sum<kWarpSize>(value);
}
__device__ __forceinline__ float warp_max(float value) {
  return group_max<kWarpSize>(value);
}

// Sum over the whole block (blockDim.x a multiple of kWarpSize, at most kWarpSize warps); every
// thread gets the total. `shared` holds kWarpSize values. The combination order is fixed by the
// block shape alone, so the result is the same bits on every run.
template <typename Value>
__device__ __forceinline__ Value block_sum(Value value, Value* shared) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  value = warp_sum(value);
  __syncthreads();  // `shared` may still be read by the caller's previous block_sum
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  return warp_sum(lane < warps ? shared[lane] : Value(0));
}

inline unsigned blocks_for(size_t work_items, int per_block) {
  return static_cast<unsigned>((work_items + per_block - 1) / per_block);
}

// Whether every pointer (null ones too) is 16-byte aligned: what the kernels that move four
// floats a load (float4) need of their arrays.
inline bool all_16_byte_aligned(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// ---- dropout as kernels draw it -----------------------------------------------------------------
// A DropoutSpec as kernels take it. While the backend records a training step for replay, the step
// number is read from device memory (`live_step`, which every replay sets) instead of the number
// the spec had when it was recorded; otherwise live_step is null.
struct KernelDropout {
  DropoutSpec spec;
  const uint32_t* live_step = nullptr;

  __device__ DropoutSpec resolve() const {
    DropoutSpec resolved = spec;
    if (live_step != nullptr) resolved.step = *live_step;
    return resolved;
  }
};

// The dropout multipliers (0, or 1/(1-p) for a kept element) of one sample's elements, exactly
// DropoutSpec::keeps(). Each Philox call gives four consecutive words; the cursor keeps the last
// block, so walking consecutive elements costs one call per four.
class DropoutCursor {
 public:
  __device__ DropoutCursor(const DropoutSpec& spec, uint32_t sample)
      : stream_(spec.stream(sample)), threshold_(spec.threshold()), scale_(spec.scale()) {}

  __device__ float multiplier(uint64_t element) {
    const uint32_t block_index = static_cast<uint32_t>(element >> 2);
    if (!cached_ || block_index != block_index_) {
      block_ = stream_.block(block_index);
      block_index_ = block_index;
      cached_ = true;
    }
    return philox_word(block_, static_cast<unsigned>(element & 3)) >= threshold_ ? scale_ : 0.0f;
  }

  // The multipliers of kCount (at most 4) consecutive elements from `first`, in order
  // (draw_multipliers: one Philox call where they lie in one block of four words). For a kernel
  // whose thread holds runs of consecutive elements; it leaves the cache alone.
  template <int kCount>
  __device__ void multipliers(uint64_t first, float (&out)[kCount]) const {
    draw_multipliers(stream_, threshold_, scale_, first, out);
  }

 private:
  RandomStream stream_;
  uint32_t threshold_;
  float scale_;
  PhiloxBlock block_{};
  uint32_t block_index_ = 0;
  bool cached_ = false;
};

}  // namespace folio::cuda
