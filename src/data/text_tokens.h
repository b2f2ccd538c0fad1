// A text cut into train and val and encoded with a byte-level BPE, read a piece at a time and
// encoded on every core: what `folio prepare` writes into token files, and what `folio train
// --data TEXT --tokenizer ...` (and eval and sample with a BPE model) hold in memory instead of
// reading such files. Both read the text through a CorpusReader, so both cut and encode it alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "tokenizer/byte_level_bpe.h"

namespace folio {

class CorpusReader;

// How much of a corpus is read and encoded at a time: large enough to keep every thread busy (the
// encoder shares a piece out in parts of 256 KiB), small beside any machine's memory.
constexpr size_t kCorpusPieceBytes = size_t(64) << 20;

// The byte offset that ends the first `fraction` of the characters of the corpus (an invalid
// byte counts as one character): nanoGPT's prepare.py cuts the decoded text there. A cut inside
// the <|endoftext|> after a document of a folder moves to its end (the token stays with train).
// It reads the corpus through once, about `piece_bytes` at a time, counting its characters and
// keeping where each piece began, then steps from the last such place to the cut. `on_bytes`
// hears the bytes counted so far.
uint64_t corpus_character_cut(const CorpusReader& corpus, double fraction, size_t piece_bytes,
                              const std::function<void(uint64_t bytes_done)>& on_bytes = {});

// Encodes bytes [begin, end) of the corpus (a split) piece by piece, each piece ending where
// ByteLevelBpe::last_safe_cut says the ids do not depend on what follows (a piece grows until it
// holds such a place), and gives each piece's ids to `take` in order: together the ids of the
// whole stretch encoded at once (special tokens' text becomes their ids), whatever the pieces'
// size and however many `threads`. `on_bytes` hears the bytes of the stretch done so far.
void tokenize_corpus(const CorpusReader& corpus, uint64_t begin, uint64_t end,
                     const ByteLevelBpe& tokenizer, int threads, size_t piece_bytes,
                     const std::function<void(std::vector<TokenId>&& ids)>& take,
                     const std::function<void(uint64_t bytes_done)>& on_bytes = {});

}  // namespace folio
