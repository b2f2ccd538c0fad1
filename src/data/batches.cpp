#include "data/batches.h"

#include <algorithm>

namespace folio {

uint64_t random_window_start(uint64_t seed, RandomPurpose purpose, uint32_t step, uint32_t window,
                             size_t split_length, int block_size) {
  const RandomStream stream = make_stream(seed, purpose, step, window);
  return uniform_below(stream.word64(0), split_length - static_cast<size_t>(block_size));
}

void copy_window(Batch& batch, int row, const TokenSequence& split, uint64_t start) {
  const int T = batch.block_size;
  int32_t* inputs = batch.inputs.data() + size_t(row) * T;
  split.copy(start, T, inputs);
  std::copy_n(inputs + 1, T - 1, batch.targets.data() + size_t(row) * T);
  split.copy(start + T, 1, batch.targets.data() + size_t(row) * T + (T - 1));
}

void fill_random_batch(Batch& batch, const TokenSequence& split, uint64_t seed,
                       RandomPurpose purpose, uint32_t step, uint32_t first_window) {
  for (int b = 0; b < batch.batch_size; ++b)
    copy_window(batch, b, split,
                random_window_start(seed, purpose, step, first_window + b, split.size(),
                                    batch.block_size));
}

void fill_random_tokens(Batch& batch, uint64_t seed, uint32_t step, uint32_t first_window,
                        int vocabulary_size) {
  const RandomStream stream = make_stream(seed, RandomPurpose::kTrainBatch, step, first_window);
  for (size_t i = 0; i < batch.inputs.size(); ++i) {
    batch.inputs[i] = static_cast<int32_t>(stream.word(2 * i) % vocabulary_size);
    batch.targets[i] = static_cast<int32_t>(stream.word(2 * i + 1) % vocabulary_size);
  }
}

size_t consecutive_window_count(size_t split_length, int block_size) {
  return split_length < 1 ? 0 : (split_length - 1) / static_cast<size_t>(block_size);
}

int fill_consecutive_batch(Batch& batch, const TokenSequence& split, size_t first_window) {
  const int T = batch.block_size;
  const size_t total = consecutive_window_count(split.size(), T);
  int filled = 0;
  for (; filled < batch.batch_size && first_window + filled < total; ++filled)
    copy_window(batch, filled, split, (first_window + filled) * size_t(T));
  return filled;
}

}  // namespace folio
