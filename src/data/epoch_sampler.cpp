#include "data/epoch_sampler.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"

namespace folio {

EpochSampler::EpochSampler(const TokenSequence& split, int block_size, uint64_t seed)
    : split_(split), block_size_(block_size), seed_(seed),
      window_count_(split.size() - static_cast<size_t>(block_size)) {
  if (split.size() <= static_cast<size_t>(block_size))
    throw Error("internal: the train split is shorter than a window");
  if (window_count_ > UINT32_MAX) throw Error("the train split has more than 2^32 windows");
}

const std::vector<uint32_t>& EpochSampler::permutation(uint64_t epoch) {
  for (int i = 0; i < 2; ++i)
    if (cached_epoch_[i] == epoch) return cached_[i];
  // Replace the older of the two (the lower epoch number).
  const int slot = cached_epoch_[0] == UINT64_MAX || (cached_epoch_[1] != UINT64_MAX &&
                                                      cached_epoch_[0] < cached_epoch_[1])
                       ? 0
                       : 1;
  std::vector<uint32_t>& order = cached_[slot];
  order.resize(window_count_);
  std::iota(order.begin(), order.end(), 0u);
  // Fisher-Yates with Philox draws keyed by the epoch: the same permutation on every rank.
  const RandomStream stream =
      make_stream(seed_, RandomPurpose::kEpochShuffle, static_cast<uint32_t>(epoch), 0);
  for (size_t i = window_count_ - 1; i > 0; --i) {
    const size_t j = static_cast<size_t>(uniform_below(stream.word64(i), i + 1));
    std::swap(order[i], order[j]);
  }
  cached_epoch_[slot] = epoch;
  return order;
}

uint64_t EpochSampler::window_start(uint64_t position) {
  return permutation(position / window_count_)[position % window_count_];
}

void EpochSampler::fill(Batch& batch, uint64_t first_position) {
  for (int b = 0; b < batch.batch_size; ++b)
    copy_window(batch, b, split_, window_start(first_position + b));
}

}  // namespace folio
