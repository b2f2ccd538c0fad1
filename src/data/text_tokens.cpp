#include "data/text_tokens.h"

#include <algorithm>
#include <string>

#include "data/corpus_reader.h"
#include "tokenizer/pretokenizer.h"

namespace folio {

namespace {

// The length of the character (or invalid byte) that starts `rest`; it looks at most 4 bytes
// ahead, so a text given a piece at a time is stepped alike when 4 bytes (or the end) are there.
size_t character_length(std::string_view rest) {
  if (PreTokenizer::valid_utf8_prefix(rest.substr(0, 4)) == 0) return 1;
  const unsigned char lead = rest[0];
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// Steps over the characters of `text` from `i` while another one is wanted (`more`) and, unless
// `at_end`, 4 bytes are left to look at; returns where it stopped.
template <typename More>
size_t step_characters(std::string_view text, size_t i, bool at_end, More more) {
  while (i < text.size() && (at_end || text.size() - i >= 4) && more())
    i += character_length(text.substr(i));
  return i;
}

}  // namespace

uint64_t corpus_character_cut(const CorpusReader& corpus, double fraction, size_t piece_bytes,
                              const std::function<void(uint64_t bytes_done)>& on_bytes) {
  // Where each piece's stepping began: (byte offset, characters before it).
  std::vector<std::pair<uint64_t, uint64_t>> marks;
  uint64_t characters = 0, offset = 0;  // offset: the first byte not yet stepped over
  std::string text;
  while (offset < corpus.size()) {
    marks.emplace_back(offset, characters);
    text.clear();
    corpus.read(offset, piece_bytes + 3, text);
    const bool at_end = offset + text.size() == corpus.size();
    offset += step_characters(text, 0, at_end, [&] { return ++characters, true; });
    if (on_bytes) on_bytes(offset);
  }
  const uint64_t cut = uint64_t(double(characters) * fraction);
  if (cut == 0) return 0;
  // From the last mark before the cut, step on to it.
  const auto mark = std::prev(std::upper_bound(
      marks.begin(), marks.end(), cut,
      [](uint64_t k, const std::pair<uint64_t, uint64_t>& m) { return k <= m.second; }));
  uint64_t k = mark->second;
  for (offset = mark->first; k < cut;) {
    text.clear();
    corpus.read(offset, piece_bytes + 3, text);
    const bool at_end = offset + text.size() == corpus.size();
    offset += step_characters(text, 0, at_end, [&] { return k++ < cut; });
  }
  return corpus.past_separator(offset);
}

void tokenize_corpus(const CorpusReader& corpus, uint64_t begin, uint64_t end,
                     const ByteLevelBpe& tokenizer, int threads, size_t piece_bytes,
                     const std::function<void(std::vector<TokenId>&& ids)>& take,
                     const std::function<void(uint64_t bytes_done)>& on_bytes) {
  std::string text;  // read, not yet encoded
  uint64_t next = begin;
  size_t wanted = piece_bytes;
  while (next < end || !text.empty()) {
    if (text.size() < wanted && next < end) {
      const size_t count = size_t(std::min<uint64_t>(wanted - text.size(), end - next));
      corpus.read(next, count, text);
      next += count;
    }
    const size_t cut = next == end ? text.size() : tokenizer.last_safe_cut(text);
    if (cut == 0) {  // no place yet where the ids cannot depend on what follows: read on
      wanted = text.size() + piece_bytes;
      continue;
    }
    take(tokenizer.encode(std::string_view(text).substr(0, cut), true, threads));
    text.erase(0, cut);
    wanted = piece_bytes;
    if (on_bytes) on_bytes(next - begin - text.size());
  }
}

}  // namespace folio
