#include "data/dataset.h"

#include <omp.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/sha256.h"
#include "data/corpus_reader.h"
#include "data/text_tokens.h"
#include "io/whole_file.h"
#include "tokenizer/byte_level_bpe.h"

namespace folio {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMakeTokens =
    "make them with folio prepare --data TEXT --tokenizer gpt2 --out DIR";

// sha256 of ids first .. first + count - 1 of `file`, as int32.
std::string ids_sha256(const TokenFile& file, size_t first, size_t count) {
  std::vector<int32_t> ids(count);
  file.copy_to(first, count, ids.data());
  return sha256_hex(std::string_view(reinterpret_cast<const char*>(ids.data()), count * 4));
}

// The token files of one split of `dir`: llm.c's shards, else nanoGPT's SPLIT.bin; empty when
// it has neither.
std::vector<std::string> split_files(const std::string& dir, const std::string& split,
                                     bool shards) {
  if (shards) return shard_paths(dir, split);
  const fs::path raw = fs::path(dir) / (split + ".bin");
  return fs::is_regular_file(raw) ? std::vector<std::string>{raw.string()}
                                  : std::vector<std::string>{};
}

// The tokenizer of the folder `dir`: --tokenizer, else its tokenizer.json, else the model's;
// --tokenizer and the folder's own tokenizer.json must agree.
Tokenizer folder_tokenizer(const std::string& dir, const std::string& spec,
                           const Tokenizer* model) {
  const fs::path own = fs::path(dir) / "tokenizer.json";
  const bool has_own = fs::is_regular_file(own);
  if (spec.empty()) {
    if (has_own) return Tokenizer::load(own.string());
    if (model != nullptr && !model->is_characters()) return *model;
    throw Error("the token folder " + dir +
                " has no tokenizer.json: pass --tokenizer gpt2|FILE|DIR naming the tokenizer that "
                "made its token files");
  }
  Tokenizer given = Tokenizer::load(spec);
  if (has_own) {
    const Tokenizer beside = Tokenizer::load(own.string());
    if (const std::string difference = given.difference(beside); !difference.empty())
      throw Error("--tokenizer " + spec + " (" + given.description() + ") is not the tokenizer " +
                  own.string() + " (" + beside.description() + "; " + difference +
                  ") that made the token files: drop --tokenizer, or remake the folder with it");
  }
  return given;
}

Dataset load_token_folder(const std::string& dir, const std::string& spec, const Tokenizer* model) {
  if (fs::exists(fs::path(dir) / kPrepareIncompleteMarker))
    throw Error("the token folder " + dir + " is incomplete (it holds " + kPrepareIncompleteMarker +
                "): a folio prepare stopped while it replaced the files there; rerun it (folio "
                "prepare ... --out DIR)");
  const bool shards = !shard_paths(dir, "train").empty() || !shard_paths(dir, "val").empty();
  const std::vector<std::string> train = split_files(dir, "train", shards);
  const std::vector<std::string> val = split_files(dir, "val", shards);
  if (train.empty() && val.empty())
    throw Error("the folder " + dir +
                " holds no token files: it needs train.bin + val.bin (nanoGPT) or "
                "train_000000.bin ... + val_000000.bin ... (llm.c); " +
                kMakeTokens);
  const auto name = [&](const std::string& split) {
    return shards ? split + " shards (" + split + "_000000.bin ...)" : split + ".bin";
  };
  if (train.empty() || val.empty()) {
    const std::string has = train.empty() ? "val" : "train",
                      lacks = train.empty() ? "train" : "val";
    throw Error("the folder " + dir + " has " + name(has) + " but no " + name(lacks) +
                ": training needs both splits; " + kMakeTokens);
  }
  return Dataset::from_token_files(dir, train, val, folder_tokenizer(dir, spec, model));
}

// The BPE tokenizer as part of a data identity: ranks that read the same ids through different
// tokenizers disagree.
std::string bpe_identity(const Tokenizer& tokenizer) {
  const BpeDefinition& definition = tokenizer.bpe()->definition();
  std::string tokenizer_text = definition.pattern;
  for (const std::string& token : definition.tokens)
    tokenizer_text += std::to_string(token.size()) + ":" + token;
  for (const auto& [left, right] : definition.merges)
    tokenizer_text += std::to_string(left) + " " + std::to_string(right) + "\n";
  return "tokenizer " + sha256_hex(tokenizer_text) + "\n";
}

// The text file `path` encoded with the BPE `tokenizer` a piece at a time (data/text_tokens.h),
// as `folio prepare` encodes it: counting its characters (where train ends) is the first tenth of
// `on_progress`, encoding the rest.
Dataset load_text_tokens(const std::string& path, double train_fraction, Tokenizer tokenizer,
                         const DataProgress& on_progress) {
  const CorpusReader text(path);
  if (text.size() == 0) throw Error(path + " is empty: train on a text with some text in it");
  const double bytes = static_cast<double>(text.size());
  const auto report = [&](double fraction) {
    if (on_progress) on_progress(fraction);
  };
  const uint64_t cut =
      corpus_character_cut(text, train_fraction, kCorpusPieceBytes,
                           [&](uint64_t done) { report(0.1 * static_cast<double>(done) / bytes); });
  std::vector<int32_t> ids;
  size_t train_count = 0;
  const uint64_t bounds[3] = {0, cut, text.size()};
  for (int split = 0; split < 2; ++split) {
    tokenize_corpus(
        text, bounds[split], bounds[split + 1], *tokenizer.bpe(), omp_get_max_threads(),
        kCorpusPieceBytes,
        [&](std::vector<TokenId>&& piece) { ids.insert(ids.end(), piece.begin(), piece.end()); },
        [&](uint64_t done) {
          report(0.1 + 0.9 * static_cast<double>(bounds[split] + done) / bytes);
        });
    if (split == 0) train_count = ids.size();
  }
  return Dataset::from_text_tokens(path, text.file_sha256(), std::move(ids), train_count,
                                   std::move(tokenizer));
}

}  // namespace

Dataset Dataset::from_text(TextDataset text) {
  Dataset dataset;
  dataset.path_ = text.path;
  dataset.identity_ = text.file_sha256;
  dataset.tokenizer_ = text.vocabulary;
  dataset.text_ = std::make_unique<const TextDataset>(std::move(text));
  dataset.train_ = dataset.text_->train();
  dataset.val_ = dataset.text_->val();
  return dataset;
}

Dataset Dataset::from_token_files(const std::string& path,
                                  const std::vector<std::string>& train_files,
                                  const std::vector<std::string>& val_files, Tokenizer tokenizer) {
  Dataset dataset;
  dataset.path_ = path;
  dataset.tokenizer_ = std::move(tokenizer);
  std::string identity = "folio token files\n";
  const auto open = [&](const std::vector<std::string>& paths) {
    std::vector<const TokenFile*> files;
    for (const std::string& file_path : paths) {
      auto file = std::make_unique<const TokenFile>(file_path, layout_from_name(file_path),
                                                    size_t(dataset.tokenizer_.size()));
      const size_t ends = std::min(file->size(), size_t(1) << 20);
      identity += fs::path(file_path).filename().string() + " " + std::to_string(file->size()) +
                  " " + ids_sha256(*file, 0, ends) + " " +
                  ids_sha256(*file, file->size() - ends, ends) + "\n";
      files.push_back(file.get());
      dataset.files_.push_back(std::move(file));
    }
    return TokenSequence(files);
  };
  dataset.train_ = open(train_files);
  dataset.val_ = open(val_files);
  identity += bpe_identity(dataset.tokenizer_);
  dataset.identity_ = sha256_hex(identity);
  return dataset;
}

Dataset Dataset::from_text_tokens(const std::string& path, const std::string& text_sha256,
                                  std::vector<int32_t> ids, size_t train_count,
                                  Tokenizer tokenizer) {
  if (train_count > ids.size()) throw Error("internal: more train ids than ids");
  Dataset dataset;
  dataset.path_ = path;
  dataset.tokenizer_ = std::move(tokenizer);
  dataset.identity_ =
      sha256_hex("folio text tokens\n" + text_sha256 + "\n" + bpe_identity(dataset.tokenizer_));
  auto kept = std::make_unique<std::vector<int32_t>>(std::move(ids));
  const std::span<const int32_t> all(*kept);
  dataset.train_ = all.first(train_count);
  dataset.val_ = all.subspan(train_count);
  dataset.text_ids_ = std::move(kept);
  return dataset;
}

std::string Dataset::summary() const {
  if (text_)
    return std::to_string(text_->tokens.size()) + " characters, vocabulary " +
           std::to_string(tokenizer_.size());
  if (text_ids_)
    return std::to_string(text_ids_->size()) + " tokens of text, " + tokenizer_.description();
  return std::to_string(train_.size() + val_.size()) + " tokens in " +
         std::to_string(files_.size()) + " token files, " + tokenizer_.description();
}

Dataset load_dataset(const std::string& path, double train_fraction,
                     const std::string& tokenizer_spec, const Tokenizer* model,
                     const std::string& model_name, const DataProgress& on_progress) {
  std::error_code error;
  Dataset dataset;
  if (fs::is_directory(path, error)) {
    if (model != nullptr && model->is_characters())
      throw Error(path + " is a folder of token files, but " + model_name +
                  " reads characters: pass --data with its text file");
    dataset = load_token_folder(path, tokenizer_spec, model);
  } else {
    if (!tokenizer_spec.empty()) {
      dataset =
          load_text_tokens(path, train_fraction, Tokenizer::load(tokenizer_spec), on_progress);
    } else if (model != nullptr && !model->is_characters()) {
      dataset = load_text_tokens(path, train_fraction, *model, on_progress);
    } else {
      dataset = Dataset::from_text(load_text_dataset(
          path, train_fraction, model ? model->characters() : nullptr, on_progress));
    }
  }
  if (model == nullptr) return dataset;
  if (const std::string difference = dataset.tokenizer().difference(*model); !difference.empty())
    throw Error("the tokenizer of " + path + " (" + dataset.tokenizer().description() +
                ") is not the one of " + model_name + " (" + model->description() + "; " +
                difference + "): prepare the data with the model's tokenizer");
  return dataset;
}

void check_dataset_fits(const Dataset& dataset, int block_size) {
  if (dataset.text() != nullptr) return check_dataset_fits(*dataset.text(), block_size);
  const size_t needed = static_cast<size_t>(block_size) + 1;
  const size_t train = dataset.train().size(), val = dataset.val().size();
  if (train < needed || val < needed)
    throw Error((dataset.is_token_folder() ? "the token files in " : "the tokens of the text ") +
                dataset.path() + " are too short: a train split of " + std::to_string(train) +
                " tokens and a val split of " + std::to_string(val) +
                ", and each needs at least block_size + 1 = " + std::to_string(needed) +
                "; use a longer text or a smaller --block_size");
}

}  // namespace folio
