// Kernels more than one op needs: deterministic sums over rows, for the parameter gradients of
// biases and LayerNorms. Each sums fixed blocks of rows, then adds the blocks' sums in a fixed
// order, so the result does not depend on scheduling (no atomics).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace folio::cuda {

// How many blocks of rows column_partial_sums() splits `rows` rows into.
int column_sum_parts(int rows);
// partials[p, j] = sum over the rows of part p of x[row, j]   (x is rows x cols, row-major;
// fp32, or bf16 summed in fp32)
void column_partial_sums(float* partials, const float* x, int rows, int cols, int parts,
                         cudaStream_t stream);
void column_partial_sums(float* partials, const __nv_bfloat16* x, int rows, int cols, int parts,
                         cudaStream_t stream);
// out[j] += sum over p of partials[p, j], in a fixed order (32 interleaved runs of p, then
// those 32 sums in order)
void add_partial_sums(float* out, const float* partials, int parts, int cols, cudaStream_t stream);

}  // namespace folio::cuda
