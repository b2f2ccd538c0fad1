// The character vocabulary: sorted unique code points of the text (the seed's
// `sorted(list(set(text)))`); a token id is a character's index in that list.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace folio {

class Vocabulary {
 public:
  Vocabulary() = default;
  static Vocabulary from_text(std::u32string_view text);
  // The characters in order, as one UTF-8 string (how checkpoints store the vocabulary).
  static Vocabulary from_utf8_symbols(std::string_view symbols_utf8);
  std::string symbols_utf8() const;

  int size() const { return static_cast<int>(symbols_.size()); }
  const std::vector<char32_t>& symbols() const { return symbols_; }
  // The id of a character, or -1 when it is not in the vocabulary.
  int id_of(char32_t c) const;
  // Encodes text; a character outside the vocabulary throws folio::Error naming `what`, it, its
  // position and the other characters outside that follow (a few).
  std::vector<int32_t> encode(std::u32string_view text, const std::string& what) const;
  void append_decoded(std::string& out, int32_t id) const;
  std::string decode(const std::vector<int32_t>& ids) const;

 private:
  // "the character 'ë' (U+00EB) at position 7, which is not in the model's vocabulary (nor is 1
  // other: '€' (U+20AC))": text[first] is outside the vocabulary.
  std::string characters_outside(std::u32string_view text, size_t first) const;

  std::vector<char32_t> symbols_;  // sorted ascending
};

}  // namespace folio
