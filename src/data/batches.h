// Training and evaluation batches: windows of block_size tokens and the same windows shifted by
// one as targets. The seed draws window starts with torch.randint(len - block_size); folio draws
// them from Philox keyed by (seed, purpose, step, global window index), so the windows of a
// global batch do not depend on how it is split over ranks or micro-steps.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/philox.h"
#include "data/token_sequence.h"

namespace folio {

struct Batch {
  int batch_size = 0, block_size = 0;
  std::vector<int32_t> inputs;   // (batch_size, block_size)
  std::vector<int32_t> targets;  // (batch_size, block_size)

  Batch() = default;
  Batch(int batch, int block)
      : batch_size(batch), block_size(block), inputs(size_t(batch) * block),
        targets(size_t(batch) * block) {}
};

// How the global batch of a step is split: world ranks x grad_accum micro-steps x batch_size
// windows. Micro-step m of rank r holds the global windows first_window(m) .. + batch_size - 1;
// the samplers key every window on its global index, so the windows of a step do not depend on
// the split (N ranks compute what one process would). Training and evaluation both use it.
struct BatchSplit {
  int world = 1, rank = 0, batch_size = 1, grad_accum = 1;

  int64_t global_windows() const { return int64_t(world) * batch_size * grad_accum; }
  int64_t first_window(int micro_step) const {
    return (int64_t(micro_step) * world + rank) * batch_size;
  }
};

// Copies the window at `start` into row `row` of the batch: inputs split[start, start + T),
// targets split[start + 1, start + T + 1).
void copy_window(Batch& batch, int row, const TokenSequence& split, uint64_t start);

// Start of window `window` (a global index) at `step`: uniform in [0, len - block_size).
uint64_t random_window_start(uint64_t seed, RandomPurpose purpose, uint32_t step, uint32_t window,
                             size_t split_length, int block_size);

// Fills `batch` with windows first_window .. first_window + batch_size - 1 of `split`.
void fill_random_batch(Batch& batch, const TokenSequence& split, uint64_t seed,
                       RandomPurpose purpose, uint32_t step, uint32_t first_window);

// Fills `batch` with random tokens below `vocabulary_size` instead of text, drawn per window
// (seed, step, first_window): what `folio bench` and the tests train on.
void fill_random_tokens(Batch& batch, uint64_t seed, uint32_t step, uint32_t first_window,
                        int vocabulary_size);

// Fills `batch` with consecutive non-overlapping windows starting at window `first_window`
// (window k covers split[k * block_size, (k + 1) * block_size]); returns how many fit, the rest
// of the batch is left unused.
int fill_consecutive_batch(Batch& batch, const TokenSequence& split, size_t first_window);

// How many consecutive non-overlapping windows the split holds.
size_t consecutive_window_count(size_t split_length, int block_size);

}  // namespace folio
