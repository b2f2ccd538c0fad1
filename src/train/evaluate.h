// Loss estimates with dropout off: the seed's estimate_loss (eval_iters random batches per
// split) during training, and `folio eval`'s exact loss over every window of a split.
#pragma once

#include <cstdint>
#include <span>

#include "config/config.h"
#include "data/text_dataset.h"
#include "model/gpt.h"

namespace folio {

struct SplitLosses {
  double train = 0, val = 0;
};

// Mean loss over config.eval_iters random batches of config.batch_size windows per split; the
// batches are keyed by `round` (the training step), so they are the same on any backend.
SplitLosses estimate_loss(GPT& model, const TextDataset& data, const Config& config,
                          uint32_t round);

// Mean loss over all consecutive non-overlapping block_size windows of the split, batch_size
// windows per forward pass. `windows` returns how many windows that was.
double split_loss(GPT& model, std::span<const int32_t> split, int block_size, int batch_size,
                  size_t* windows = nullptr);

}  // namespace folio
