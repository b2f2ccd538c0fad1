#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/kernel_helpers.cuh"
#include "backend/cuda/shared_kernels.h"

namespace folio::cuda {

namespace {

constexpr int kRowsPerPart = 64;

// Threads run along the columns, so each row is read coalesced; each thread sums its column
// over the part's rows in order.
__global__ void column_partial_sums_kernel(float* partials, const float* x, int rows, int cols,
                                           int rows_per_part) {
  const int column = blockIdx.x * blockDim.x + threadIdx.x;
  const int part = blockIdx.y;
  if (column >= cols) return;
  const int first = part * rows_per_part, last = min(rows, first + rows_per_part);
  float total = 0.0f;
  for (int row = first; row < last; ++row) total += x[size_t(row) * cols + column];
  partials[size_t(part) * cols + column] = total;
}

__global__ void add_partial_sums_kernel(float* out, const float* partials, int parts, int cols) {
  const int column = blockIdx.x * blockDim.x + threadIdx.x;
  if (column >= cols) return;
  float total = 0.0f;
#pragma unroll 8
  for (int part = 0; part < parts; ++part) total += partials[size_t(part) * cols + column];
  out[column] += total;
}

}  // namespace

int column_sum_parts(int rows) {
  return std::max(1, (rows + kRowsPerPart - 1) / kRowsPerPart);
}

void column_partial_sums(float* partials, const float* x, int rows, int cols, int parts,
                         cudaStream_t stream) {
  const int rows_per_part = (rows + parts - 1) / parts;
  const dim3 grid(blocks_for(cols, kBlockThreads), parts);
  column_partial_sums_kernel<<<grid, kBlockThreads, 0, stream>>>(partials, x, rows, cols,
                                                                 rows_per_part);
  check_launch("column_partial_sums");
}

void add_partial_sums(float* out, const float* partials, int parts, int cols, cudaStream_t stream) {
  add_partial_sums_kernel<<<blocks_for(cols, kBlockThreads), kBlockThreads, 0, stream>>>(
      out, partials, parts, cols);
  check_launch("add_partial_sums");
}

}  // namespace folio::cuda
