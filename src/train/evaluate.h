// Loss estimates with dropout off: the seed's estimate_loss (eval_iters random batches per
// split) during training, shared out over the ranks, and `folio eval`'s exact loss over every
// window of a split.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>

#include "config/config.h"
#include "data/dataset.h"
#include "model/gpt.h"

namespace folio {

struct SplitLosses {
  double train = 0, val = 0;
};

// This rank's share of the seed's estimate. Evaluation batch k (k < eval_iters) is the global
// batch's worth of windows, world x batch_size x grad_accum, keyed by `round` (the training
// step), so the estimate is the same on any backend and however the batch is split over ranks
// and micro-steps; with one process and grad_accum 1 it is the seed's estimate_loss. Returns the
// SUMS of this rank's batch_size-window mean losses; the caller adds the ranks' sums and divides
// by eval_iters x grad_accum x world. After each k, `keep_going()` is asked (by every rank, so
// it may be collective); when it says no the estimate is abandoned (nullopt).
std::optional<SplitLosses> estimate_loss_share(GPT& model, const Dataset& data,
                                               const Config& config, uint32_t round, int rank,
                                               int world, const std::function<bool()>& keep_going);

// Mean loss over the consecutive non-overlapping block_size windows of the split (all of them, or
// the first `max_windows`), batch_size windows per forward pass. `windows` returns how many
// windows that was; `on_progress` hears the number of windows done after each pass.
double split_loss(GPT& model, const TokenSequence& split, int block_size, int batch_size,
                  size_t max_windows = SIZE_MAX, size_t* windows = nullptr,
                  const std::function<void(size_t windows_done)>& on_progress = {});

}  // namespace folio
