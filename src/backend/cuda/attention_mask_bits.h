// Attention's dropout masks kept as bits between its forward and backward kernels on the GPU
// (FOLIO_ATTENTION_DROPOUT_MASKS=bits): what CudaBackend hands the kernels (attention_kernels.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/host_device.h"

namespace folio::cuda {

// The dropout masks of the weights as bits (FOLIO_ATTENTION_DROPOUT_MASKS=bits): a row of
// words_per_row 32-bit words for each query (b, h, i), in the order of the saved lse, whose bit j
// (bit j % 32 of word j / 32) says whether the weight of key j was kept. The register forward
// kernel writes them as it draws them, and the register backward kernels read them instead of
// drawing the same masks again with Philox (as the CPU's attention does, cpu/dropout_masks.h).
// Bits of keys after the query (or past T) may hold anything: those weights are zero.
struct AttentionMaskBits {
  uint32_t* words = nullptr;  // null: nothing kept, the kernels draw
  int words_per_row = 0;

  FOLIO_HOST_DEVICE static int words_per_row_of(int T) { return (T + 31) / 32; }
  FOLIO_HOST_DEVICE uint32_t* row(int bh, int T, int i) const {
    return words + (size_t(bh) * T + i) * words_per_row;
  }
};

}  // namespace folio::cuda
