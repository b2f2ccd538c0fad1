// Byte-level BPE, as GPT-2 (and tiktoken, and HF tokenizers' ByteLevel + BPE) defines it.
//
// Text is cut into pieces (tokenizer/pretokenizer.h); each piece starts as its bytes, one token
// per byte, and the merges are applied in rank order: repeatedly the adjacent pair with the
// lowest merge rank (the leftmost of equals) becomes the token the merge makes, until no
// adjacent pair has a merge. Special tokens (`<|endoftext|>`) are cut out of the text before
// that, when the caller allows them; otherwise they are ordinary text.
//
// Token files spell bytes in GPT-2's printable alphabet (byte 0x20 is "Ġ", 0x0A is "Ċ"): the
// 188 printable bytes stand for themselves and the others become U+0100 onwards. In memory the
// tokens are raw bytes, so decode is concatenation and any byte string round-trips.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/pretokenizer.h"

namespace folio {

using TokenId = uint32_t;

// GPT-2's byte alphabet: bytes -> the printable text that token files use, and back (nullopt
// when `text` has a character outside the alphabet).
std::string bytes_to_alphabet(std::string_view bytes);
std::optional<std::string> alphabet_to_bytes(std::string_view text);
// The id GPT-2 gives byte `b` among the 256 byte tokens: their order is that of the alphabet's
// characters (the printable bytes first).
std::array<TokenId, 256> gpt2_byte_order();

// What a tokenizer file says: everything needed to encode, decode and write it back.
struct BpeDefinition {
  std::vector<std::string> tokens;                  // id -> bytes ("" where an id is unused)
  std::vector<bool> used;                           // id -> whether the vocabulary has it
  std::vector<std::pair<TokenId, TokenId>> merges;  // in rank order: merge 0 first
  std::vector<TokenId> specials;                    // ids of the special (added) tokens
  std::string pattern = kGpt2Pattern;               // the pre-tokenisation regex
  bool ignore_merges = false;  // HF's option: a piece that is one token is taken whole
  std::string source;          // where it came from, for error messages
};

class ByteLevelBpe {
 public:
  explicit ByteLevelBpe(BpeDefinition definition);

  const BpeDefinition& definition() const { return definition_; }
  size_t vocab_size() const { return definition_.tokens.size(); }
  std::optional<TokenId> special_token(std::string_view text) const;

  // The ids of `text`. With `allow_special` the special tokens' text becomes their ids. Long
  // texts are shared out over `threads` threads in parts of 256 KiB: for GPT-2's pattern cut
  // where a piece boundary is certain, for any pattern that never looks back (GPT-4's, Llama 3's)
  // cut anywhere and joined where the parts' pieces meet; the ids do not depend on the number of
  // threads. `on_bytes`, if given, hears how many bytes of `text` are encoded as the work goes on.
  std::vector<TokenId> encode(std::string_view text, bool allow_special = false,
                              int threads = 1,
                              const std::function<void(size_t bytes_done)>& on_bytes = {}) const;
  // No special tokens, one thread: appends to `out`.
  void encode_ordinary(std::string_view text, std::vector<TokenId>& out) const;
  // The bytes of `ids`; an id outside the vocabulary is an error.
  std::string decode(std::span<const TokenId> ids) const;

  // The last place in `text` (0 if none) where it can be cut without changing its ids whatever
  // text follows: encode(text[0, p)) then encode(text[p, ...) + more) are the ids of
  // encode(text + more), with special tokens allowed. The end of the last special token, or for
  // GPT-2's pattern the last of cut_for_threads' cuts after it. What `folio prepare` reads a
  // corpus by, a bounded piece at a time (data/text_tokens.h).
  size_t last_safe_cut(std::string_view text) const;

  // Cuts `text` into stretches no pre-token crosses, each about `target_bytes` long (split before a
  // newline that follows a printable ASCII character): GPT-2's pattern's shares, and what the
  // BPE trainer (which pre-tokenises as GPT-2) shares out. Text for any other `pattern` stays
  // whole.
  static std::vector<std::string_view> cut_for_threads(std::string_view text, size_t target_bytes,
                                                       const std::string& pattern = kGpt2Pattern);

 private:
  struct Merge {
    uint32_t rank;
    TokenId merged;
  };
  // Open addressing from a pair of ids to its merge: the hot lookup of encoding.
  class PairTable {
   public:
    void build(const std::vector<std::pair<TokenId, TokenId>>& pairs,
               const std::vector<TokenId>& merged);
    const Merge* find(TokenId left, TokenId right) const {
      const uint64_t key = (uint64_t(left) << 32) | right;
      for (uint64_t slot = (key * 0x9E3779B97F4A7C15ull) >> shift_;; slot = (slot + 1) & mask_) {
        if (keys_[slot] == key) return &values_[slot];
        if (keys_[slot] == kEmpty) return nullptr;
      }
    }

   private:
    static constexpr uint64_t kEmpty = ~0ull;
    std::vector<uint64_t> keys_;
    std::vector<Merge> values_;
    uint64_t mask_ = 0;
    int shift_ = 64;
  };

  // The first special token in `text` from `start` on (the longest where two begin together).
  struct SpecialAt {
    size_t at, size;
    TokenId id;
  };
  std::optional<SpecialAt> next_special(std::string_view text, size_t start) const;

  struct Share;  // one thread's part of a text (byte_level_bpe.cpp)
  std::vector<size_t> share_starts(std::string_view stretch, size_t target_bytes) const;
  void encode_share(Share& share) const;
  size_t join(const Share& share, size_t position, std::vector<TokenId>& all) const;
  // encode_piece through a per-thread cache of recent short pieces.
  void encode_piece_cached(std::string_view piece, std::vector<TokenId>& out) const;
  void encode_piece(std::string_view piece, std::vector<TokenId>& out) const;
  void encode_long_piece(std::vector<TokenId>& symbols) const;

  BpeDefinition definition_;
  PreTokenizer pretokenizer_;
  std::array<TokenId, 256> byte_token_{};
  PairTable merges_;
  std::unordered_map<std::string, TokenId> whole_tokens_;  // for ignore_merges
  std::vector<std::pair<std::string, TokenId>> special_texts_;
  uint64_t instance_;  // tells this tokenizer's entries in the per-thread piece cache apart
};

}  // namespace folio
