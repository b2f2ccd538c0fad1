// Training a byte-level BPE on your text, as GPT-2's tokenizer was made and as HF tokenizers'
// BpeTrainer does it:
//   1. the text is pre-tokenised with GPT-2's pattern (or another, such as GPT-4's) and the
//      distinct pieces ("words") are counted (in parallel for GPT-2's pattern; for another, each
//      document on a thread of its own; `<|endoftext|>` in the text only separates documents);
//   2. every word starts as its bytes; the 256 byte tokens take GPT-2's ids;
//   3. repeatedly the adjacent pair with the highest count over all words (weighted by the
//      word's count; of equal counts the pair of smaller ids) becomes a new token, until the
//      vocabulary has `vocab_size` tokens, `<|endoftext|>` (the last id) included.
// Step 3 keeps the pair counts up to date incrementally: a merge touches only the words that
// hold its pair (an index from pair to words), and a heap whose stale entries are re-pushed
// with their current count when they reach the top finds the next pair.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "tokenizer/byte_level_bpe.h"

namespace folio {

struct BpeTrainingReport {
  size_t words = 0;          // distinct pre-tokenised pieces
  size_t merges = 0;         // merges learnt
  double count_seconds = 0;  // step 1
  double merge_seconds = 0;  // step 3
};

// `on_progress(fraction)` is called now and then (from one thread).
// The tokenizer pre-tokenises with `pattern`.
BpeDefinition train_byte_level_bpe(std::string_view text, size_t vocab_size, int threads,
                                   BpeTrainingReport* report = nullptr,
                                   const std::function<void(double)>& on_progress = {},
                                   const std::string& pattern = kGpt2Pattern);

}  // namespace folio
