// The data a run trains and evaluates on, in either form `--data` names:
//   - a UTF-8 text FILE: the seeds' characters (data/text_dataset.h), ids in memory, the first
//     train_fraction of the characters train and the rest val; or, with a BPE tokenizer
//     (--tokenizer, or the model's), its tokens, encoded as it loads (data/text_tokens.h), the
//     same ids that `folio prepare` would write;
//   - a folder DIR of token files that `folio prepare` (or nanoGPT's / llm.c's scripts) wrote:
//     llm.c's shards (train_000000.bin ..., val_000000.bin ...) when present, else nanoGPT's
//     train.bin + val.bin, memory-mapped (data/token_shards.h), each split its files read as one
//     sequence. The tokenizer is --tokenizer when given, else DIR/tokenizer.json.
// Either way the trainer sees train() and val() (data/token_sequence.h) and the tokenizer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/text_dataset.h"
#include "data/token_sequence.h"
#include "data/token_shards.h"
#include "tokenizer/tokenizer.h"

namespace folio {

class Dataset {
 public:
  // The char ids of a text file.
  static Dataset from_text(TextDataset text);
  // The BPE ids of the text file `path` whose bytes have the sha256 `text_sha256`: train's
  // `train_count` ids, then val's.
  static Dataset from_text_tokens(const std::string& path, const std::string& text_sha256,
                                  std::vector<int32_t> ids, size_t train_count,
                                  Tokenizer tokenizer);
  // The token files `train_files` and `val_files` (in order), read with `tokenizer`; `path`
  // names the folder. Every id is checked below the tokenizer's size.
  static Dataset from_token_files(const std::string& path,
                                  const std::vector<std::string>& train_files,
                                  const std::vector<std::string>& val_files, Tokenizer tokenizer);

  const std::string& path() const { return path_; }
  // What identifies the data in rank checks and on --resume (a sha256 in hex). A text: its
  // bytes' sha256. Token files: a cheap identity, not a hash of every byte (a 9-billion-token
  // corpus would take a minute per start): each file's name and token count and the sha256 of
  // its first and last 2^20 ids, and a sha256 of the tokenizer's tokens and merges.
  const std::string& identity() const { return identity_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const TokenSequence& train() const { return train_; }
  const TokenSequence& val() const { return val_; }
  // Whether the data is a folder of token files (else a text file, in characters or tokens).
  bool is_token_folder() const { return !files_.empty(); }
  // The text file's dataset (char ids, vocabulary), or nullptr for token files.
  const TextDataset* text() const { return text_.get(); }
  // "1115394 characters, vocabulary 65", "338025 tokens in 2 token files, byte-level BPE, ..."
  // or "338025 tokens of text, byte-level BPE, ...".
  std::string summary() const;

 private:
  std::string path_, identity_;
  Tokenizer tokenizer_;
  // The storage the views point into; behind pointers so that a moved Dataset keeps them valid.
  std::unique_ptr<const TextDataset> text_;
  std::vector<std::unique_ptr<const TokenFile>> files_;
  std::unique_ptr<const std::vector<int32_t>> text_ids_;  // a text's BPE ids: train, then val
  TokenSequence train_, val_;
};

// Loads what `path` names (a text file or a folder of token files, see above).
//   tokenizer_spec  --tokenizer: gpt2, a tokenizer.json, or a folder holding one
//                   (tokenizer/tokenizer_files.h); empty: DIR/tokenizer.json for a folder, the
//                   model's tokenizer (else the characters) for a text
//   model           the tokenizer of the model that will read the data (a checkpoint's, a
//                   resumed run's), or nullptr for a new model. A text is then encoded with it
//                   (its characters, or its BPE); a folder without a tokenizer of its own takes
//                   it. The data's tokenizer must then be the model's: an error names both when
//                   not.
//   model_name      how that error names the model ("checkpoint out/ckpt.safetensors")
Dataset load_dataset(const std::string& path, double train_fraction,
                     const std::string& tokenizer_spec = "", const Tokenizer* model = nullptr,
                     const std::string& model_name = "the model",
                     const DataProgress& on_progress = {});

// Both splits must hold at least one window of block_size + 1 tokens (input and shifted target).
void check_dataset_fits(const Dataset& dataset, int block_size);

}  // namespace folio
