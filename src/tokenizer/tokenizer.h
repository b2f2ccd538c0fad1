// The model's tokenizer, whichever kind it is: the seeds' characters (data/vocabulary.h) or a
// byte-level BPE such as GPT-2's (tokenizer/byte_level_bpe.h). The rest of the program (the
// trainer, sampling, checkpoints, `folio info`) sees only this: how many ids, text to ids, ids
// back to text piece by piece, and the end-of-text id where there is one.
//
// It travels with the model: a char checkpoint stores its characters (metadata `vocab`), a BPE
// checkpoint its tokenizer.json text (metadata `tokenizer`), see io/checkpoint_metadata.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/vocabulary.h"

namespace folio {

class ByteLevelBpe;

class Tokenizer {
 public:
  Tokenizer() = default;
  // A char model's tokenizer is its vocabulary (implicit: where a Vocabulary was, it still fits).
  Tokenizer(Vocabulary characters);  // NOLINT(google-explicit-constructor)
  explicit Tokenizer(std::shared_ptr<const ByteLevelBpe> bpe);
  // A byte-level BPE from `spec`: "gpt2", a folder (encoder.json + vocab.bpe, vocab.json +
  // merges.txt, or tokenizer.json) or a tokenizer.json file (tokenizer/tokenizer_files.h).
  static Tokenizer load(const std::string& spec);
  // A byte-level BPE from a tokenizer.json's text; `source` names it in errors.
  static Tokenizer from_tokenizer_json(const std::string& text, const std::string& source);
  // The tokenizer.json text of a BPE (what checkpoints store and `folio export` writes).
  std::string tokenizer_json() const;

  bool is_characters() const { return bpe_ == nullptr; }
  // The number of ids (the model's vocab_size): characters, or the BPE's largest id + 1.
  int size() const;
  // "65 characters" or "byte-level BPE, 50257 tokens (<|endoftext|> = 50256)".
  std::string description() const;

  // Text (UTF-8) to ids. Characters: a character outside the vocabulary, or invalid UTF-8, is an
  // error naming `what`. BPE: any bytes; `<|endoftext|>` in the text is the special token.
  std::vector<int32_t> encode(std::string_view text, const std::string& what) const;
  // Appends the bytes of token `id`. A BPE token may hold part of a UTF-8 character: streaming
  // output goes through StreamingDecoder, which prints characters whole.
  void append_decoded(std::string& out, int32_t id) const;
  std::string decode(const std::vector<int32_t>& ids) const;

  // The id of `<|endoftext|>` where the tokenizer has it (GPT-2's: 50256); chars: none.
  std::optional<int32_t> end_of_text() const;
  // What a sample without a prompt starts from: the seed's token 0 (a newline for
  // tiny-Shakespeare), or `<|endoftext|>` (a document boundary, as GPT-2 samples unconditioned).
  int32_t start_token() const;

  // The underlying tokenizer: exactly one of the two is non-null.
  const Vocabulary* characters() const { return bpe_ ? nullptr : &characters_; }
  const ByteLevelBpe* bpe() const { return bpe_.get(); }

  // Same kind and same ids for the same text (BPE: vocabulary, merges, specials and pattern).
  bool operator==(const Tokenizer& other) const;

 private:
  Vocabulary characters_;
  std::shared_ptr<const ByteLevelBpe> bpe_;
};

// Decodes generated tokens one at a time for streaming: holds back the bytes of a UTF-8
// character that a later token may complete, so each piece it returns is whole characters.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // The text that token `id` completes (possibly empty).
  std::string push(int32_t id);
  // Whatever is still held back (the bytes of a character the tokens never completed).
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;
};

}  // namespace folio
