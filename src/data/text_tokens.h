// A text cut into train and val and encoded with a byte-level BPE, on every core: what
// `folio prepare` writes into token files, and what `folio train --data TEXT --tokenizer ...`
// (and eval and sample with a BPE model) hold in memory instead of reading such files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "tokenizer/byte_level_bpe.h"

namespace folio {

struct TextTokens {
  std::vector<uint32_t> train, val;
};

// The byte offset that ends the first `fraction` of the characters of `text` (an invalid byte
// counts as one character): nanoGPT's prepare.py cuts the decoded text there.
size_t character_cut(std::string_view text, double fraction);

// The first train_fraction of the characters train, the rest val, each encoded with `tokenizer`
// (special tokens' text becomes their ids) on `threads` threads; the ids do not depend on the
// number of threads. `on_bytes` hears how many bytes of `text` have been encoded so far.
TextTokens tokenize_text(std::string_view text, const ByteLevelBpe& tokenizer,
                         double train_fraction, int threads,
                         const std::function<void(size_t bytes_done)>& on_bytes = {});

}  // namespace folio
