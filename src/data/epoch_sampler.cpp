#include "data/epoch_sampler.h"

#include "core/error.h"
#include "core/philox.h"

namespace folio {

namespace {
constexpr int kRounds = 6;
}

EpochSampler::EpochSampler(const TokenSequence& split, int block_size, uint64_t seed)
    : split_(split),
      block_size_(block_size),
      seed_(seed),
      window_count_(split.size() - static_cast<size_t>(block_size)),
      half_bits_(1) {
  if (split.size() <= static_cast<size_t>(block_size))
    throw Error("internal: the train split is shorter than a window");
  while (half_bits_ < 31 && (uint64_t(1) << (2 * half_bits_)) < window_count_) ++half_bits_;
  if ((uint64_t(1) << (2 * half_bits_)) < window_count_)
    throw Error("the train split has more than 2^62 windows: use sampling=random");
}

// One pass through the network: (left, right) -> (right, left ^ F(round, right)) six times.
uint64_t EpochSampler::feistel(uint64_t epoch, uint64_t index) const {
  const uint64_t mask = (uint64_t(1) << half_bits_) - 1;
  uint64_t left = index >> half_bits_, right = index & mask;
  for (uint32_t round = 0; round < kRounds; ++round) {
    // Epoch e's round r draws from its own stream; `right` (< 2^31) picks the word.
    const RandomStream stream =
        make_stream(seed_, RandomPurpose::kEpochShuffle, static_cast<uint32_t>(epoch), round);
    const uint64_t mixed = left ^ (stream.word64(right) & mask);
    left = right;
    right = mixed;
  }
  return (left << half_bits_) | right;
}

uint64_t EpochSampler::shuffle(uint64_t epoch, uint64_t index) const {
  uint64_t shuffled = feistel(epoch, index);
  while (shuffled >= window_count_) shuffled = feistel(epoch, shuffled);
  return shuffled;
}

void EpochSampler::fill(Batch& batch, uint64_t first_position) const {
  for (int b = 0; b < batch.batch_size; ++b)
    copy_window(batch, b, split_, window_start(first_position + b));
}

}  // namespace folio
