// sampling=epoch: every window of the train split once per epoch, in an order shuffled anew each
// epoch, as seed 003's DistributedSampler gives each rank a different share of a shuffled epoch.
//
// The epochs form one stream of window starts; the window at position p of the stream is window
// shuffle(epoch, p mod N) of epoch p / N (N = number of windows). The global batch of step s
// covers positions s G .. s G + G - 1 (G = world x batch_size x grad_accum), and window g of it
// goes to the rank and micro-step that own global window index g, exactly as in sampling=random.
// So the windows do not depend on how the batch is split, and a resumed run needs no sampler
// state beyond the step. (Unlike DistributedSampler the last batch of an epoch runs on into the
// next epoch instead of being dropped or padded.)
//
// shuffle(epoch, .) is a permutation of [0, N) computed for one index at a time, so nothing is
// stored (a stored permutation took 4 bytes per window, 36 GB for openwebtext's 9 billion): a
// Feistel network on the 4^h >= N indices of h + h bits, six rounds, each round's function a
// Philox draw keyed by the seed, the epoch and the round (a pseudo-random permutation, Luby and
// Rackoff); an index it sends to N or beyond goes through the network again until it lands below
// N ("cycle walking": since 4^h < 4N, fewer than four passes on average), which keeps the map
// one-to-one on [0, N).
#pragma once

#include <cstdint>

#include "data/batches.h"

namespace folio {

class EpochSampler {
 public:
  EpochSampler(const TokenSequence& split, int block_size, uint64_t seed);

  uint64_t windows_per_epoch() const { return window_count_; }
  // The window that epoch `epoch` visits at `index` (< windows_per_epoch()).
  uint64_t shuffle(uint64_t epoch, uint64_t index) const;
  // Start of the window at `position` of the epoch stream.
  uint64_t window_start(uint64_t position) const {
    return shuffle(position / window_count_, position % window_count_);
  }
  // Fills batch with the windows at positions first_position .. + batch_size - 1.
  void fill(Batch& batch, uint64_t first_position) const;

 private:
  uint64_t feistel(uint64_t epoch, uint64_t index) const;

  TokenSequence split_;
  int block_size_;
  uint64_t seed_;
  uint64_t window_count_;
  int half_bits_;  // h: the network permutes 4^h indices
};

}  // namespace folio
