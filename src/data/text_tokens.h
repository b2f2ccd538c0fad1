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

class CorpusReader;

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

// The same for a corpus on disk (`folio prepare`), read about `piece_bytes` at a time instead of
// whole: the same cut and the same ids as tokenize_text on the corpus's bytes in memory.
// corpus_character_cut reads it through once to count its characters, keeping where each piece
// began, and returns the byte offset of the cut; tokenize_corpus then encodes bytes [begin, end)
// (a split) piece by piece, each piece ending where ByteLevelBpe::last_safe_cut says the ids do
// not depend on what follows (a piece grows until it holds such a place), and gives each piece's
// ids to `take` in order. `on_bytes` hears the bytes of the corpus (of the split) done so far.
uint64_t corpus_character_cut(const CorpusReader& corpus, double fraction, size_t piece_bytes,
                              const std::function<void(uint64_t bytes_done)>& on_bytes = {});
void tokenize_corpus(const CorpusReader& corpus, uint64_t begin, uint64_t end,
                     const ByteLevelBpe& tokenizer, int threads, size_t piece_bytes,
                     const std::function<void(std::vector<TokenId>&& ids)>& take,
                     const std::function<void(uint64_t bytes_done)>& on_bytes = {});

}  // namespace folio
