#include "data/vocabulary.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "data/utf8.h"

namespace folio {

Vocabulary Vocabulary::from_text(std::u32string_view text) {
  // Characters of the Basic Multilingual Plane are counted in a table sized to the largest one
  // seen (128 entries for ASCII text), the rare others sorted.
  char32_t largest_small = 0;
  for (char32_t c : text)
    if (c < 0x10000) largest_small = std::max(largest_small, c);
  std::vector<bool> seen_small(static_cast<size_t>(largest_small) + 1, false);
  std::vector<char32_t> large;
  for (char32_t c : text) {
    if (c < 0x10000) seen_small[c] = true;
    else large.push_back(c);
  }
  Vocabulary vocabulary;
  for (char32_t c = 0; c <= largest_small; ++c)
    if (seen_small[c]) vocabulary.symbols_.push_back(c);
  std::sort(large.begin(), large.end());
  large.erase(std::unique(large.begin(), large.end()), large.end());
  vocabulary.symbols_.insert(vocabulary.symbols_.end(), large.begin(), large.end());
  return vocabulary;
}

Vocabulary Vocabulary::from_utf8_symbols(std::string_view symbols_utf8) {
  Utf8Problem problem;
  auto decoded = decode_utf8(symbols_utf8, &problem, /*translate_newlines=*/false);
  if (!decoded) throw Error("the vocabulary is not valid UTF-8: " + problem.what);
  Vocabulary vocabulary;
  vocabulary.symbols_.assign(decoded->begin(), decoded->end());
  if (!std::is_sorted(vocabulary.symbols_.begin(), vocabulary.symbols_.end()) ||
      std::adjacent_find(vocabulary.symbols_.begin(), vocabulary.symbols_.end()) !=
          vocabulary.symbols_.end())
    throw Error("the vocabulary is not a sorted list of distinct characters");
  return vocabulary;
}

std::string Vocabulary::symbols_utf8() const {
  return encode_utf8(std::u32string_view(symbols_.data(), symbols_.size()));
}

int Vocabulary::id_of(char32_t c) const {
  auto it = std::lower_bound(symbols_.begin(), symbols_.end(), c);
  if (it == symbols_.end() || *it != c) return -1;
  return static_cast<int>(it - symbols_.begin());
}

std::string Vocabulary::characters_outside(std::u32string_view text, size_t first) const {
  std::string what = "the character " + describe_code_point(text[first]) + " at position " +
                     std::to_string(first) + ", which is not in the model's vocabulary";
  std::set<char32_t> others;  // the other characters the vocabulary lacks, from there on
  for (size_t i = first + 1; i < text.size(); ++i)
    if (text[i] != text[first] && id_of(text[i]) < 0) others.insert(text[i]);
  if (others.empty()) return what;
  what += " (nor " + std::string(others.size() == 1 ? "is" : "are") + " " +
          std::to_string(others.size()) + " other" + (others.size() == 1 ? "" : "s") + ":";
  int listed = 0;
  for (const char32_t c : others) {
    if (listed++ == 8) {
      what += ", ...";
      break;
    }
    what += (listed == 1 ? " " : ", ") + describe_code_point(c);
  }
  return what + ")";
}

std::vector<int32_t> Vocabulary::encode(std::u32string_view text, const std::string& what) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const int id = id_of(text[i]);
    if (id < 0)
      throw Error(what + " has " + characters_outside(text, i) +
                  "; use only characters of the training text");
    ids.push_back(id);
  }
  return ids;
}

void Vocabulary::append_decoded(std::string& out, int32_t id) const {
  append_utf8(out, symbols_.at(static_cast<size_t>(id)));
}

std::string Vocabulary::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) append_decoded(out, id);
  return out;
}

}  // namespace folio
