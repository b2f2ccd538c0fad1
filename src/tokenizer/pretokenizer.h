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

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace folio {

inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// GPT-4's (tiktoken's cl100k_base; Llama 3 uses it too): case-insensitive contractions, a word
// with one leading non-letter, numbers in runs of at most three digits, punctuation with the
// newlines after it.
inline constexpr const char* kCl100kPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

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
    split_from(text, 0, std::string_view::npos, on_piece);
  }
  std::vector<std::string_view> split(std::string_view text) const;

  // The pieces of text[from, ...) as split(text) makes them when `from` is where one of its
  // pieces begins, up to and including the first piece that ends at or after `until`; returns
  // where that piece ends (text.size() if none does). The regex sees the text after `until`, so
  // a look-ahead there decides as in the whole text. What it cannot see is the text before
  // `from`: that is why this is only for patterns that never look back (starts_anywhere()).
  //
  // split() checks each maximal run of valid UTF-8 whole before the regex reads it; here a run
  // is checked (and given to the regex) only up to kLookAheadBytes past `until`, or a split of a
  // share of a long valid text would check the rest of the text each time. A piece is taken only
  // if it ends half that far before where the check stopped; if not, the check goes twice as far.
  // So this assumes that no match depends on text more than kLookAheadBytes / 2 past its end:
  // the patterns of GPT-2, GPT-4 and Llama 3 look one character ahead.
  static constexpr size_t kLookAheadBytes = size_t(1) << 16;
  template <class OnPiece>
  size_t split_from(std::string_view text, size_t from, size_t until, OnPiece&& on_piece) const {
    size_t start = from, look_ahead = kLookAheadBytes;
    while (start < text.size()) {
      const size_t checked_to =
          until == std::string_view::npos
              ? text.size()
              : std::min(text.size(), std::max(until, start) + look_ahead);
      const size_t valid = valid_utf8_prefix(text.substr(start, checked_to - start));
      if (valid > 0) {
        // Whether the run goes on past what was checked: then the regex's view ends early.
        const bool cut_short = start + valid == checked_to && checked_to < text.size();
        const size_t trusted = cut_short ? valid - std::min(valid, look_ahead / 2) : valid;
        const size_t relative_until = until > start ? until - start : 0;
        const Stop stop =
            split_valid(text.substr(start, valid), relative_until, trusted, on_piece);
        if (!stop.done) {  // a piece would end too near the check's end: look further
          start += stop.at;
          look_ahead *= 2;
          continue;
        }
        if (stop.at < valid || start + valid >= until) return start + stop.at;
        start += valid;
      }
      const size_t invalid = invalid_utf8_prefix(text.substr(start));
      if (invalid > 0) {
        on_piece(text.substr(start, invalid));
        start += invalid;
        if (start >= until) return start;
      }
    }
    return text.size();
  }

  // Whether the pattern looks at nothing before where a match starts (no look-behind, \b, \B,
  // \A, \G or ^), so that a split may begin at any piece boundary with the text before it cut
  // off, as split_from's do. True of GPT-2's, GPT-4's (cl100k, o200k) and Llama 3's patterns.
  bool starts_anywhere() const { return starts_anywhere_; }

 private:
  struct Compiled;
  // `text` is valid UTF-8; the regex's matches, and any text between them, are pieces. Stops
  // after the first piece that ends at or after `until` (done, at its end), or before a piece
  // that would end after `trusted` (not done, at its start), else at the end of the text.
  struct Stop {
    size_t at;
    bool done;
  };
  template <class OnPiece>
  Stop split_valid(std::string_view text, size_t until, size_t trusted, OnPiece& on_piece) const {
    MatchData match(*this);
    size_t offset = 0;
    while (offset < text.size()) {
      size_t begin, end;
      if (!find(match, text, offset, begin, end)) begin = end = text.size();
      if (end == begin && begin < text.size())  // an empty match: move on by one character
        end = begin + utf8_length(static_cast<unsigned char>(text[begin]));
      if (begin > offset) {  // the text before the match is a piece of its own
        if (begin > trusted) return {offset, false};
        on_piece(text.substr(offset, begin - offset));
        if (begin >= until) return {begin, true};
      }
      if (end == begin) break;  // no match, and no text left
      if (end > trusted) return {begin, false};
      on_piece(text.substr(begin, end - begin));
      offset = end;
      if (end >= until) return {end, true};
    }
    return {text.size(), true};
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
  bool starts_anywhere_ = false;
};

}  // namespace folio
