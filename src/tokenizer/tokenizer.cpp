#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "data/utf8.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/tokenizer_files.h"

namespace folio {

Tokenizer::Tokenizer(Vocabulary characters) : characters_(std::move(characters)) {}

Tokenizer::Tokenizer(std::shared_ptr<const ByteLevelBpe> bpe) : bpe_(std::move(bpe)) {
  if (bpe_ == nullptr) throw Error("internal: a BPE tokenizer needs its BPE");
}

Tokenizer Tokenizer::load(const std::string& spec) {
  return Tokenizer(std::make_shared<const ByteLevelBpe>(load_tokenizer_definition(spec)));
}

Tokenizer Tokenizer::from_tokenizer_json(const std::string& text, const std::string& source) {
  return Tokenizer(std::make_shared<const ByteLevelBpe>(read_tokenizer_json_text(text, source)));
}

std::string Tokenizer::tokenizer_json() const {
  if (!bpe_) throw Error("internal: a character vocabulary has no tokenizer.json");
  return tokenizer_json_text(bpe_->definition());
}

int Tokenizer::size() const {
  return bpe_ ? static_cast<int>(bpe_->vocab_size()) : characters_.size();
}

std::string Tokenizer::description() const {
  if (!bpe_) return std::to_string(characters_.size()) + " characters";
  std::string text = "byte-level BPE, " + std::to_string(size()) + " tokens";
  if (const auto end = end_of_text())
    text += " (" + std::string(kEndOfText) + " = " + std::to_string(*end) + ")";
  return text;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const std::string& what) const {
  if (bpe_) {
    const std::vector<TokenId> ids = bpe_->encode(text, /*allow_special=*/true);
    return std::vector<int32_t>(ids.begin(), ids.end());
  }
  // Read as the training text was (Python's universal newlines: "\r\n" and "\r" are "\n"), so
  // a prompt saved with Windows line endings reads as it looks; a character vocabulary never
  // holds "\r".
  Utf8Problem problem;
  const auto decoded = decode_utf8(text, &problem, /*translate_newlines=*/true);
  if (!decoded) throw Error(what + " is not valid UTF-8 (" + problem.what + ")");
  return characters_.encode(*decoded, what);
}

void Tokenizer::append_decoded(std::string& out, int32_t id) const {
  if (!bpe_) {
    characters_.append_decoded(out, id);
    return;
  }
  const TokenId token = static_cast<TokenId>(id);
  out += bpe_->decode(std::span<const TokenId>(&token, 1));
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) append_decoded(out, id);
  return out;
}

std::optional<int32_t> Tokenizer::end_of_text() const {
  if (!bpe_) return std::nullopt;
  const std::optional<TokenId> id = bpe_->special_token(kEndOfText);
  return id ? std::optional<int32_t>(static_cast<int32_t>(*id)) : std::nullopt;
}

int32_t Tokenizer::start_token() const {
  return end_of_text().value_or(0);
}

std::string Tokenizer::difference(const Tokenizer& other) const {
  if (is_characters() != other.is_characters())
    return "one reads characters, the other is a byte-level BPE";
  if (size() != other.size())
    return std::to_string(size()) + " ids against " + std::to_string(other.size());
  if (!bpe_)
    return characters_.symbols() == other.characters_.symbols() ? "" : "different characters";
  if (bpe_ == other.bpe_) return "";
  const BpeDefinition &a = bpe_->definition(), &b = other.bpe_->definition();
  for (size_t id = 0; id < a.tokens.size(); ++id)
    if (a.used[id] != b.used[id] || a.tokens[id] != b.tokens[id])
      return "token " + std::to_string(id) + " is '" + bytes_to_alphabet(a.tokens[id]) +
             "' against '" + bytes_to_alphabet(b.tokens[id]) + "'";
  if (a.merges.size() != b.merges.size())
    return std::to_string(a.merges.size()) + " merges against " + std::to_string(b.merges.size());
  for (size_t rank = 0; rank < a.merges.size(); ++rank)
    if (a.merges[rank] != b.merges[rank]) return "merge " + std::to_string(rank + 1) + " differs";
  if (a.specials != b.specials) return "different special tokens";
  if (a.pattern != b.pattern) return "different pre-tokenisation patterns";
  if (a.ignore_merges != b.ignore_merges) return "ignore_merges differs";
  return "";
}

namespace {

// Where the bytes of `text` stop being whole characters: the start of a UTF-8 character at its
// end whose lead byte promises more bytes than follow, else text.size(). Invalid bytes are
// never held back (no later byte can make them whole).
size_t whole_prefix(std::string_view text) {
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto byte = static_cast<unsigned char>(text[n - back]);
    if ((byte & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t length = byte >= 0xF0 && byte <= 0xF4  ? 4
                          : byte >= 0xE0 && byte < 0xF0 ? 3
                          : byte >= 0xC2 && byte < 0xE0 ? 2
                                                        : 1;
    return length > back ? n - back : n;
  }
  return n;
}

}  // namespace

std::string StreamingDecoder::push(int32_t id) {
  tokenizer_.append_decoded(pending_, id);
  const size_t whole = whole_prefix(pending_);
  std::string ready = pending_.substr(0, whole);
  pending_.erase(0, whole);
  return ready;
}

std::string StreamingDecoder::finish() {
  return std::exchange(pending_, std::string());
}

}  // namespace folio
