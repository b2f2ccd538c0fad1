// A text file as token ids, split as the seed splits it: the first int(train_fraction * len)
// tokens are train, the rest val.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/vocabulary.h"

namespace folio {

struct TextDataset {
  std::string path;
  std::string file_sha256;  // of the file's bytes: identifies the data in logs and rank checks
  Vocabulary vocabulary;
  std::vector<int32_t> tokens;
  size_t train_size = 0;

  std::span<const int32_t> train() const { return {tokens.data(), train_size}; }
  std::span<const int32_t> val() const {
    return {tokens.data() + train_size, tokens.size() - train_size};
  }
};

// Reports how far preparing a data file has come, as a fraction of 1.
using DataProgress = std::function<void(double fraction)>;

// Reads and encodes `path`. With `vocabulary` (from a checkpoint) the text is encoded with it and
// a character outside it is an error; without, the vocabulary is built from the text. Reading
// counts as the first half of `on_progress`, decoding and encoding as the second.
TextDataset load_text_dataset(const std::string& path, double train_fraction,
                              const Vocabulary* vocabulary = nullptr,
                              const DataProgress& on_progress = {});

// The same from the file's bytes already in memory; `path` only names it in errors.
TextDataset text_dataset_from_bytes(const std::string& bytes, const std::string& path,
                                    double train_fraction, const Vocabulary* vocabulary = nullptr,
                                    const DataProgress& on_progress = {});

// Throws when `first_bytes` (at least the first 12 of the file `path`, where it has them) are
// those of a checkpoint (safetensors) or of an llm.c token shard, which --data given by mistake
// would read as a text (it had been "not valid UTF-8 ... convert it with iconv"); says what to
// pass instead.
void refuse_checkpoint_or_shard(std::string_view first_bytes, const std::string& path);

// Both splits must hold at least one window of block_size + 1 tokens (input and shifted target).
void check_dataset_fits(const TextDataset& dataset, int block_size);

}  // namespace folio
