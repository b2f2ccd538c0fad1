#include "data/text_tokens.h"

#include "tokenizer/pretokenizer.h"

namespace folio {

size_t character_cut(std::string_view text, double fraction) {
  // The length of the character (or invalid byte) at `i`.
  const auto step = [&](size_t i) {
    if (PreTokenizer::valid_utf8_prefix(text.substr(i, 4)) == 0) return size_t(1);
    const unsigned char lead = text[i];
    return size_t(lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4);
  };
  size_t characters = 0;
  for (size_t i = 0; i < text.size(); i += step(i)) ++characters;
  const size_t cut = size_t(double(characters) * fraction);
  size_t i = 0;
  for (size_t k = 0; k < cut && i < text.size(); ++k) i += step(i);
  return i;
}

TextTokens tokenize_text(std::string_view text, const ByteLevelBpe& tokenizer,
                         double train_fraction, int threads,
                         const std::function<void(size_t bytes_done)>& on_bytes) {
  const size_t cut = character_cut(text, train_fraction);
  const std::string_view splits[2] = {text.substr(0, cut), text.substr(cut)};
  TextTokens tokens;
  std::vector<uint32_t>* ids[2] = {&tokens.train, &tokens.val};
  for (int s = 0; s < 2; ++s) {
    const size_t before = s == 0 ? 0 : cut;
    const auto progress = [&](size_t bytes_done) {
      if (on_bytes) on_bytes(before + bytes_done);
    };
    const std::vector<TokenId> split_ids = tokenizer.encode(splits[s], true, threads, progress);
    ids[s]->assign(split_ids.begin(), split_ids.end());
  }
  return tokens;
}

}  // namespace folio
