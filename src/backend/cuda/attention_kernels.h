// The flash-attention kernels' arguments and launchers, shared by attention_flash_fp32.cu (the dispatch,
// and the fp32 kernels on CUDA cores) and attention_flash_bf16.cu (bf16 on tensor cores).
//
// Both compute, per (sample b, head h), softmax(q k^T / sqrt(hs), causal) with dropout on the
// weights, times v, a block of query rows at a time against tiles of keys, keeping a running
// maximum and sum per row (online softmax), so the T x T matrix never reaches memory. Saved for
// the backward pass: each row's log-sum-exp, from which the probabilities are recomputed tile by
// tile, and a copy of the output, for the row dot products D_i = dout_i . out_i. The backward
// pass runs as two kernels, one per block of keys (dk, dv) and one per block of queries (dq),
// each recomputing the probabilities it needs; one kernel adding into dq from every key block
// would need atomics, whose order (and so whose rounding) changes from run to run.
//
// Dropout on the weights draws the same mask as the CPU: element (h T + i) T + j of sample b's
// stream, through DropoutSpec; the row sums are taken before dropout, as softmax then dropout.
#pragma once

#include <cuda_runtime_api.h>

#include "backend/cuda/attention_mask_bits.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace folio::cuda {

struct AttentionShape {
  int B, T, H, head_size;
  __host__ __device__ int width() const { return H * head_size; }  // A
};

struct AttentionForwardArgs {
  float* out;        // (B, T, A)
  bf16* out_bf16;    // its bf16 copy for the next product, or null
  float* lse;        // (B, H, T) saved
  float* out_copy;   // (B, T, A) saved
  const float* qkv;  // (B, T, 3A)
  AttentionShape shape;
  int q_start;  // rows before it are left alone (generation's key/value cache)
  KernelDropout dropout;
  AttentionMaskBits masks;  // to write (the register kernel), or none
};

struct AttentionBackwardArgs {
  float* dqkv;        // (B, T, 3A), all of it written
  bf16* dqkv_bf16;    // its bf16 copy for the next product, or null
  const float* dout;  // (B, T, A)
  const float* qkv;
  const float* lse;      // (B, H, T) from the forward pass
  const float* row_dot;  // (B, H, T): dout_i . out_i
  AttentionShape shape;
  KernelDropout dropout;
  AttentionMaskBits masks;  // the forward pass's, read by the register kernels, or none
};

// What a block of an attention kernel works on: blockIdx.y picks the sample b and the head h.
struct HeadBlock {
  int b, h, bh;
  const float* q;     // head h's query columns in row 0 of sample b: keys at + A, values at + 2A,
                      // rows 3A apart
  const float* dout;  // head h's columns of the output gradient in row 0 of sample b, rows A apart
  float scale;        // 1 / sqrt(head size)
};

__device__ inline HeadBlock head_block(const AttentionShape& s, const float* qkv,
                                       const float* dout) {
  HeadBlock block;
  block.bh = blockIdx.y;
  block.b = block.bh / s.H;
  block.h = block.bh % s.H;
  block.q = qkv + size_t(block.b) * s.T * 3 * s.width() + size_t(block.h) * s.head_size;
  block.dout =
      dout ? dout + size_t(block.b) * s.T * s.width() + size_t(block.h) * s.head_size : nullptr;
  block.scale = 1.0f / sqrtf(float(s.head_size));
  return block;
}

inline constexpr int kLargestFlashHeadSize = 128;

// fp32 on CUDA cores, any head size up to kLargestFlashHeadSize.
void flash_attention_forward_fp32(const AttentionForwardArgs& args, cudaStream_t stream);
void flash_attention_backward_fp32(const AttentionBackwardArgs& args, cudaStream_t stream);

// bf16 products on tensor cores (fp32 accumulation and softmax); head sizes 16, 32, 64, 128.
bool tensor_core_attention_supports(int head_size);
void flash_attention_forward_bf16(const AttentionForwardArgs& args, cudaStream_t stream);
// The same with the scores in registers (attention_registers.cu: mma.sync, FlashAttention-2's
// arrangement), the default (cuda_backend.cu says why); the backward takes head sizes up to 64.
struct RegisterKernelOptions {
  // the next step's rows copied into shared memory by cp.async while the block computes
  // (attention_tiles.cuh), for head sizes up to 64 (staged_attention_supports; larger heads load
  // as without)
  bool staged = false;
  // the products' fragments read from shared memory by ldmatrix, a warp's four 8 x 8 matrices
  // an instruction, instead of each thread's own 32- and 16-bit loads (the same registers)
  bool ldmatrix = false;
};
void flash_attention_forward_registers(const AttentionForwardArgs& args, cudaStream_t stream,
                                       const RegisterKernelOptions& options);
bool register_attention_backward_supports(int head_size);
bool staged_attention_supports(int head_size);
void flash_attention_backward_registers(const AttentionBackwardArgs& args, cudaStream_t stream,
                                        const RegisterKernelOptions& options);
void flash_attention_backward_bf16(const AttentionBackwardArgs& args, cudaStream_t stream);

}  // namespace folio::cuda
