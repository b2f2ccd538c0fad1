// Pre-tokenisation: the text is cut into pieces by a regex before BPE sees it, and no token ever
// crosses a cut. GPT-2's pattern keeps contractions, words with their leading space, numbers and
// punctuation runs apart, and leaves a run of spaces before a word as its own piece but for the
// last space, which goes with the word (`\s+(?!\S)`).
//
// The regex engine is PCRE2 (Debian's libpcre2) in UTF mode with Unicode properties (\p{L},
// \p{N}, and \s meaning Unicode white space, as in Python's `regex` and Rust's `fancy-regex`
// that tiktoken and HF tokenizers use), JIT-compiled.
//
// Invalid UTF-8: tiktoken and HF tokenizers take Unicode strings, so raw bytes never reach their
// regex. folio works on bytes, and its rule is: the text is cut around every maximal run of bytes
// that are not part of a valid UTF-8 character (strict: no overlong forms, no surrogates, nothing
// above U+10FFFF), each such run is one piece of its own, and the valid stretches between are
// split by the regex independently. Every byte therefore lands in exactly one piece, and decode
// gives back the original bytes.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace folio {

inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class PreTokenizer {
 public:
  explicit PreTokenizer(const std::string& pattern = kGpt2Pattern);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  const std::string& pattern() const { return pattern_; }

  // Calls `on_piece(std::string_view)` for each piece of `text`, in order; the pieces
  // concatenate to `text`. Thread-safe (each call has its own match data).
  template <class OnPiece>
  void split(std::string_view text, OnPiece&& on_piece) const {
    size_t start = 0;
    while (start < text.size()) {
      const size_t valid = valid_utf8_prefix(text.substr(start));
      if (valid > 0) {
        split_valid(text.substr(start, valid), on_piece);
        start += valid;
      }
      const size_t invalid = invalid_utf8_prefix(text.substr(start));
      if (invalid > 0) on_piece(text.substr(start, invalid));
      start += invalid;
    }
  }
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Compiled;
  // `text` is valid UTF-8; the regex's matches, and any text between them, are pieces.
  template <class OnPiece>
  void split_valid(std::string_view text, OnPiece& on_piece) const {
    MatchData match(*this);
    size_t offset = 0;
    while (offset < text.size()) {
      size_t begin, end;
      if (!find(match, text, offset, begin, end)) begin = end = text.size();
      if (begin > offset) on_piece(text.substr(offset, begin - offset));
      if (end == begin) {  // no match, or an empty one: move on by one character
        if (begin >= text.size()) break;
        end = begin + utf8_length(static_cast<unsigned char>(text[begin]));
        on_piece(text.substr(begin, end - begin));
      } else {
        on_piece(text.substr(begin, end - begin));
      }
      offset = end;
    }
  }

  struct MatchData {
    explicit MatchData(const PreTokenizer& owner);
    ~MatchData();
    void* data;
  };
  bool find(MatchData& match, std::string_view text, size_t offset, size_t& begin,
            size_t& end) const;
  static size_t utf8_length(unsigned char lead) {
    return lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  }

 public:
  // The length of the longest prefix of `bytes` that is valid UTF-8, and of the longest prefix
  // made only of bytes that start no valid character.
  static size_t valid_utf8_prefix(std::string_view bytes);
  static size_t invalid_utf8_prefix(std::string_view bytes);

 private:
  std::string pattern_;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace folio
