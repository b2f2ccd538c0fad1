// folio prepare --data FILE|DIR --tokenizer gpt2|FILE|DIR --out DIR: tokenise a text once into
// nanoGPT's train.bin/val.bin and llm.c's shards (data/token_shards.h), with the tokenizer
// beside them.
#include <omp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "core/error.h"
#include "data/text_tokens.h"
#include "data/token_shards.h"
#include "io/whole_file.h"
#include "progress/task_progress.h"
#include "tokenizer/tokenizer_files.h"

namespace folio {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCheckData = "check the path (--data FILE|DIR)";

// FILE: its text. DIR: every regular file in it (name order, hidden files skipped), each a
// document followed by <|endoftext|>, as nanoGPT's openwebtext preparation does.
std::string read_corpus(const std::string& data) {
  if (!fs::is_directory(data)) return read_whole_file(data, kCheckData);
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(data))
    if (entry.is_regular_file() && entry.path().filename().string()[0] != '.')
      files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw Error("the folder " + data + " has no files: put text files in it");
  std::string corpus;
  for (const std::string& file : files) corpus += read_whole_file(file, kCheckData) + kEndOfText;
  return corpus;
}

// The byte offset of character int(n * fraction) of `text`, n its number of characters (an
// invalid byte counts as one): where nanoGPT's prepare.py cuts train from val.
}  // namespace

int prepare_command(Arguments& arguments) {
  if (arguments.take_flag("help")) {
    std::cout
        << "usage: folio prepare --data FILE|DIR --tokenizer gpt2|FILE|DIR --out DIR\n"
           "                     [--val_fraction 0.1] [--shard_tokens 100000000] [--threads N]\n\n"
           "Tokenises the text once, on all cores. FILE is one text; DIR is a folder of texts,\n"
           "each a document followed by <|endoftext|>. The first 90% of the characters become\n"
           "the train split and the rest val (as nanoGPT's prepare.py cuts them). Writes into\n"
           "the --out folder:\n"
           "  train.bin, val.bin              nanoGPT's layout: raw uint16 token ids\n"
           "  train_000000.bin, ...,          llm.c's shards: a 256-int32 header (magic 20240520,\n"
           "  val_000000.bin                  version 1, token count), then uint16 ids; over\n"
           "                                  65,536 ids: magic 20240801, version 7, uint32 ids\n"
           "  tokenizer.json                  the tokenizer that made them\n";
    return 0;
  }
  const std::optional<std::string> data = arguments.take("data");
  const std::optional<std::string> spec = arguments.take("tokenizer");
  const std::optional<std::string> out = arguments.take("out");
  const std::optional<std::string> val_text = arguments.take("val_fraction");
  const std::optional<std::string> shard_text = arguments.take("shard_tokens");
  const std::optional<std::string> threads_text = arguments.take("threads");
  arguments.finish("prepare",
                   {"data", "tokenizer", "out", "val_fraction", "shard_tokens", "threads", "help"});
  if (!data || !spec || !out)
    throw UsageError("folio prepare needs --data FILE|DIR --tokenizer gpt2|FILE|DIR --out DIR");
  const double val_fraction =
      val_text ? parse_double_option("val_fraction", *val_text, 0, 0.9) : 0.1;
  const size_t shard_tokens =
      shard_text ? size_t(parse_int_option("shard_tokens", *shard_text, 1, INT32_MAX))
                 : size_t(100'000'000);
  const int threads =
      threads_text ? parse_int_option("threads", *threads_text, 1, 1024) : omp_get_max_threads();

  const ByteLevelBpe tokenizer = load_tokenizer(*spec);
  const std::string corpus = read_corpus(*data);
  if (corpus.empty()) throw Error(*data + " is empty: prepare a text with some text in it");
  TextTokens tokens;
  {
    TaskProgress progress("tokenising " + fs::path(*data).filename().string(),
                          double(corpus.size()), "bytes", StatusLine::standard_error());
    tokens = tokenize_text(corpus, tokenizer, 1 - val_fraction, threads,
                           [&](size_t bytes_done) { progress.set_done(double(bytes_done)); });
    progress.finish();
  }
  const std::vector<uint32_t> ids[2] = {std::move(tokens.train), std::move(tokens.val)};
  if (ids[0].empty() || ids[1].empty())
    throw Error("the " + std::string(ids[0].empty() ? "train" : "val") + " split of " + *data +
                " has no tokens: give more text, or another --val_fraction");

  fs::create_directories(*out);
  const size_t vocab = tokenizer.vocab_size();
  const char* names[2] = {"train", "val"};
  for (int s = 0; s < 2; ++s) {
    if (vocab <= 65536)
      write_token_file(*out + "/" + names[s] + ".bin", TokenFileLayout::kRawUint16, ids[s], vocab);
    for (size_t start = 0, shard = 0; start < ids[s].size(); start += shard_tokens, ++shard) {
      char name[64];
      std::snprintf(name, sizeof(name), "/%s_%06zu.bin", names[s], shard);
      const size_t count = std::min(shard_tokens, ids[s].size() - start);
      write_token_file(*out + name, TokenFileLayout::kShard,
                       std::span<const uint32_t>(ids[s]).subspan(start, count), vocab);
    }
  }
  write_whole_file(*out + "/tokenizer.json", tokenizer_json_text(tokenizer.definition()));
  std::fprintf(stderr, "folio: %zu train and %zu val tokens (vocabulary %zu) in %s\n",
               ids[0].size(), ids[1].size(), vocab, out->c_str());
  return 0;
}

}  // namespace folio
