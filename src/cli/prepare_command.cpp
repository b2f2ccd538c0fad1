// folio prepare --data FILE|DIR --tokenizer gpt2|FILE|DIR --out DIR: tokenise a text once into
// nanoGPT's train.bin/val.bin and llm.c's shards (data/token_shards.h), with the tokenizer
// beside them.
#include <omp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>

#include "cli/commands.h"
#include "core/error.h"
#include "data/corpus_reader.h"
#include "data/text_tokens.h"
#include "data/token_shards.h"
#include "io/whole_file.h"
#include "progress/task_progress.h"
#include "tokenizer/tokenizer_files.h"

namespace folio {

namespace fs = std::filesystem;

namespace {

// The token files of one split, written as its ids come: llm.c's shards of `shard_tokens` ids
// (each written whole once full, so a shard's ids are all that is held), then nanoGPT's raw file
// from the shards' ids (the same uint16 values, after each shard's header).
class SplitFiles {
 public:
  SplitFiles(std::string out, std::string split, size_t shard_tokens, size_t vocab)
      : out_(std::move(out)), split_(std::move(split)), shard_tokens_(shard_tokens), vocab_(vocab) {
    // Grown by doubling, it would briefly need half as much again (capped: the virtual memory of
    // --shard_tokens 2^31 would be 8 GiB).
    pending_.reserve(std::min(shard_tokens_, size_t(1) << 27));
  }

  void add(const std::vector<TokenId>& ids) {
    for (size_t taken = 0; taken < ids.size();) {
      const size_t count = std::min(ids.size() - taken, shard_tokens_ - pending_.size());
      pending_.insert(pending_.end(), ids.begin() + taken, ids.begin() + taken + count);
      taken += count;
      if (pending_.size() == shard_tokens_) write_shard();
    }
  }

  // The last shard, then the raw file (for vocabularies that fit uint16); the number of ids.
  size_t finish() {
    if (!pending_.empty()) write_shard();
    if (vocab_ <= 65536) {
      write_file_atomically(out_ + "/" + split_ + ".bin", [&](AtomicFileWriter& raw) {
        std::string bytes;
        for (const std::string& shard : shards_) {
          const uint64_t size = fs::file_size(shard), header = kShardHeaderInts * 4;
          for (uint64_t at = header; at < size; at += kCorpusPieceBytes) {
            bytes = read_file_range(shard, at,
                                    size_t(std::min<uint64_t>(kCorpusPieceBytes, size - at)));
            raw.write(bytes.data(), bytes.size());
          }
        }
      });
    }
    return tokens_;
  }

 private:
  static std::string read_file_range(const std::string& path, uint64_t offset, size_t count) {
    std::string bytes(count, '\0');
    std::ifstream in(path, std::ios::binary);
    if (!in.seekg(std::streamoff(offset)) || !in.read(bytes.data(), std::streamsize(count)))
      throw Error("cannot read back " + path + ", just written: check the --out folder");
    return bytes;
  }

  std::string shard_path(size_t index) const {
    char name[64];
    std::snprintf(name, sizeof(name), "/%s_%06zu.bin", split_.c_str(), index);
    return out_ + name;
  }

  void write_shard() {
    shards_.push_back(shard_path(shards_.size()));
    write_token_file(shards_.back(), TokenFileLayout::kShard, pending_, vocab_);
    tokens_ += pending_.size();
    pending_.clear();
  }

  const std::string out_, split_;
  const size_t shard_tokens_, vocab_;
  std::vector<uint32_t> pending_;  // the next shard's ids
  std::vector<std::string> shards_;
  size_t tokens_ = 0;
};

// Where the new files are written until all are: a hidden folder inside --out, so on its file
// system, where moving a file is a rename. An interrupted prepare leaves it (the next removes it)
// and the folder's old files as they were.
constexpr const char* kStagingFolder = ".folio_prepare_partial";

// The files a prepare writes, and so replaces: train.bin, val.bin, train_NNNNNN.bin,
// val_NNNNNN.bin and tokenizer.json.
bool is_prepare_output(const std::string& name) {
  static const std::regex token_file("(train|val)(_[0-9]+)?\\.bin");
  return name == "tokenizer.json" || std::regex_match(name, token_file);
}

// Replaces the prepare files of `out` by those in `staging`: the old all go (an earlier prepare's
// shards beyond this one's count, and its train.bin/val.bin where this vocabulary has none), the
// new are moved in. While that is under way the folder holds the incomplete-marker, which the
// token-folder reader refuses (data/token_shards.h): killed then, the folder says so rather than
// be read as a mix of two preparations.
void replace_prepare_files(const fs::path& out, const fs::path& staging) {
  const fs::path marker = out / kPrepareIncompleteMarker;
  write_whole_file(marker.string(),
                   "folio prepare was replacing the token files of this folder and stopped: rerun "
                   "it\n");
  std::vector<fs::path> old;
  for (const auto& entry : fs::directory_iterator(out))
    if (entry.is_regular_file() && is_prepare_output(entry.path().filename().string()))
      old.push_back(entry.path());
  for (const fs::path& path : old) fs::remove(path);
  for (const auto& entry : fs::directory_iterator(staging))
    fs::rename(entry.path(), out / entry.path().filename());
  fs::remove(staging);
  fs::remove(marker);
}

// --out inside (or equal to) a --data folder: the next prepare would read its own token files as
// documents.
bool is_inside(const fs::path& path, const fs::path& folder) {
  // Canonical, without a trailing '/' (its "" element would differ); as given if unreadable.
  const auto absolute = [](const fs::path& p) {
    std::error_code unreadable;
    fs::path canonical = fs::weakly_canonical(p, unreadable);
    if (unreadable) canonical = fs::absolute(p).lexically_normal();
    return canonical.has_filename() ? canonical : canonical.parent_path();
  };
  const fs::path inner = absolute(path), outer = absolute(folder);
  const auto [end_of_outer, _] =
      std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
  return end_of_outer == outer.end();
}

}  // namespace

int prepare_command(Arguments& arguments) {
  if (arguments.take_flag("help")) {
    std::cout
        << "usage: folio prepare --data FILE|DIR --tokenizer gpt2|FILE|DIR --out DIR\n"
           "                     [--val_fraction 0.1] [--shard_tokens 100000000] [--threads N]\n\n"
           "Tokenises the text once, on all cores. FILE is one text; DIR is a folder of texts\n"
           "(subfolders too, in path order; hidden ones skipped), each a document followed by\n"
           "<|endoftext|>. The first 90% of the characters become the train split and the rest\n"
           "val (as nanoGPT's prepare.py cuts them; a cut inside an <|endoftext|> moves to its\n"
           "end). Writes into the --out folder (not inside DIR),\n"
           "replacing what an earlier prepare wrote there once the new files are all written:\n"
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
  // Above 0: prepare writes both splits (0 had been said to be in the range, then refused).
  const double val_fraction =
      val_text ? parse_double_option("val_fraction", *val_text, 0, 0.9, /*min_exclusive=*/true)
               : 0.1;
  const size_t shard_tokens =
      shard_text ? size_t(parse_int_option("shard_tokens", *shard_text, 1, INT32_MAX))
                 : size_t(100'000'000);
  const int threads = parse_threads_option(threads_text);

  if (fs::is_directory(*data) && is_inside(*out, *data))
    throw UsageError("--out " + *out + " is inside the --data folder " + *data +
                     ", whose files are all read as documents: give --out a folder outside it");
  const ByteLevelBpe tokenizer = load_tokenizer(*spec);
  const CorpusReader corpus(*data);
  if (corpus.size() == 0) throw Error(*data + " is empty: prepare a text with some text in it");
  make_output_folder(*out, "--out DIR");  // before the work, not after it
  const std::string name = fs::path(*data).filename().string();
  // The corpus is read a piece at a time, twice: once to count its characters (where train ends),
  // then to encode it; what is held is a piece of text, its ids and a shard's ids.
  uint64_t cut = 0;
  {
    TaskProgress progress("counting the characters of " + name, double(corpus.size()), "bytes",
                          StatusLine::standard_error());
    cut = corpus_character_cut(corpus, 1 - val_fraction, kCorpusPieceBytes,
                               [&](uint64_t done) { progress.set_done(double(done)); });
    progress.finish();
  }
  if (cut == 0 || cut == corpus.size())
    throw Error("the " + std::string(cut == 0 ? "train" : "val") + " split of " + *data +
                " has no tokens: give more text, or another --val_fraction");

  // The new files go to the staging folder, then replace the old at once; after an error the
  // staging folder goes and --out is as it was.
  const fs::path staging = fs::path(*out) / kStagingFolder;
  fs::remove_all(staging);  // an interrupted prepare's
  make_output_folder(staging.string(), "--out DIR");
  const size_t vocab = tokenizer.vocab_size();
  size_t counts[2] = {0, 0};
  try {
    TaskProgress progress("tokenising " + name, double(corpus.size()), "bytes",
                          StatusLine::standard_error());
    const char* names[2] = {"train", "val"};
    const uint64_t bounds[3] = {0, cut, corpus.size()};
    for (int s = 0; s < 2; ++s) {
      SplitFiles files(staging.string(), names[s], shard_tokens, vocab);
      tokenize_corpus(
          corpus, bounds[s], bounds[s + 1], tokenizer, threads, kCorpusPieceBytes,
          [&](std::vector<TokenId>&& ids) { files.add(ids); },
          [&](uint64_t done) { progress.set_done(double(bounds[s] + done)); });
      counts[s] = files.finish();
    }
    progress.finish();
    write_whole_file((staging / "tokenizer.json").string(),
                     tokenizer_json_text(tokenizer.definition()));
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    throw;
  }
  replace_prepare_files(*out, staging);
  std::fprintf(stderr, "folio: %zu train and %zu val tokens (vocabulary %zu) in %s\n", counts[0],
               counts[1], vocab, out->c_str());
  return 0;
}

}  // namespace folio
