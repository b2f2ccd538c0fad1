#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/kernel_helpers.cuh"
#include "backend/cuda/shared_kernels.h"

namespace folio::cuda {

namespace {

constexpr int kRowsPerPart = 64;

// Threads run along the columns, so each row is read coalesced; each thread sums its column
// over the part's rows in order. x fp32, or bf16 (a gradient held as a product's bf16 operand),
// summed in fp32 either way.
template <typename Element>
__global__ void column_partial_sums_kernel(float* partials, const Element* x, int rows, int cols,
                                           int rows_per_part) {
  const int column = blockIdx.x * blockDim.x + threadIdx.x;
  const int part = blockIdx.y;
  if (column >= cols) return;
  const int first = part * rows_per_part, last = min(rows, first + rows_per_part);
  float total = 0.0f;
  for (int row = first; row < last; ++row) total += as_float(x[size_t(row) * cols + column]);
  partials[size_t(part) * cols + column] = total;
}

template <typename Element>
void launch_column_partial_sums(float* partials, const Element* x, int rows, int cols, int parts,
                                cudaStream_t stream) {
  const int rows_per_part = (rows + parts - 1) / parts;
  const dim3 grid(blocks_for(cols, kBlockThreads), parts);
  column_partial_sums_kernel<<<grid, kBlockThreads, 0, stream>>>(partials, x, rows, cols,
                                                                 rows_per_part);
  check_launch("column_partial_sums");
}

// A block holds 32 columns (a warp reads them coalesced, 128 bytes) by 32 lanes of parts:
// lane y sums parts y, y + 32, y + 64, ... in order, then one thread per column adds the 32
// lanes' sums in order. A fixed order, so the same bits every run. (One thread per column
// summing every part in turn left the GPU nearly idle: LayerNorm's backward adds 512 parts of
// C = 384 columns, 2 blocks of threads each walking 512 dependent loads, 34 us a call and 9% of
// shakespeare_char's step on an H200, ncu, 2026-11-27.)
constexpr int kSumColumns = 32, kSumLanes = 32;

__global__ void add_partial_sums_kernel(float* out, const float* partials, int parts, int cols) {
  __shared__ float lane_sums[kSumLanes][kSumColumns + 1];  // +1: no bank conflicts reading down
  const int column = blockIdx.x * kSumColumns + threadIdx.x;
  float total = 0.0f;
  if (column < cols) {
#pragma unroll 4
    for (int part = threadIdx.y; part < parts; part += kSumLanes)
      total += partials[size_t(part) * cols + column];
  }
  lane_sums[threadIdx.y][threadIdx.x] = total;
  __syncthreads();
  if (threadIdx.y != 0 || column >= cols) return;
  total = 0.0f;
  for (int lane = 0; lane < kSumLanes; ++lane) total += lane_sums[lane][threadIdx.x];
  out[column] += total;
}

}  // namespace

int column_sum_parts(int rows) {
  return std::max(1, (rows + kRowsPerPart - 1) / kRowsPerPart);
}

void column_partial_sums(float* partials, const float* x, int rows, int cols, int parts,
                         cudaStream_t stream) {
  launch_column_partial_sums(partials, x, rows, cols, parts, stream);
}

void column_partial_sums(float* partials, const bf16* x, int rows, int cols, int parts,
                         cudaStream_t stream) {
  launch_column_partial_sums(partials, x, rows, cols, parts, stream);
}

void add_partial_sums(float* out, const float* partials, int parts, int cols, cudaStream_t stream) {
  add_partial_sums_kernel<<<blocks_for(cols, kSumColumns), dim3(kSumColumns, kSumLanes), 0,
                            stream>>>(out, partials, parts, cols);
  check_launch("add_partial_sums");
}

}  // namespace folio::cuda
