// sampling=epoch: every window of the train split once per epoch, in an order shuffled anew each
// epoch, as seed 003's DistributedSampler gives each rank a different share of a shuffled epoch.
//
// The epochs form one stream of window starts; the window at position p of the stream is the
// (p mod N)-th entry of epoch p / N's permutation (N = number of windows). The global batch of
// step s covers positions s G .. s G + G - 1 (G = world x batch_size x grad_accum), and window g
// of it goes to the rank and micro-step that own global window index g, exactly as in
// sampling=random. So the windows do not depend on how the batch is split, and a resumed run
// needs no sampler state beyond the step. (Unlike DistributedSampler the last batch of an epoch
// runs on into the next epoch instead of being dropped or padded.)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "data/batches.h"

namespace folio {

class EpochSampler {
 public:
  EpochSampler(const TokenSequence& split, int block_size, uint64_t seed);

  size_t windows_per_epoch() const { return window_count_; }
  // Start of the window at `position` of the epoch stream.
  uint64_t window_start(uint64_t position);
  // Fills batch with the windows at positions first_position .. + batch_size - 1.
  void fill(Batch& batch, uint64_t first_position);

 private:
  const std::vector<uint32_t>& permutation(uint64_t epoch);

  TokenSequence split_;
  int block_size_;
  uint64_t seed_;
  size_t window_count_;
  // The two most recent epochs' permutations (a batch may straddle an epoch boundary).
  uint64_t cached_epoch_[2] = {UINT64_MAX, UINT64_MAX};
  std::vector<uint32_t> cached_[2];
};

}  // namespace folio
