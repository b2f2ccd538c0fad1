// folio tokenizer train --data FILE --vocab_size N --out tok.json: a byte-level BPE learnt from
// your text, written as a Hugging Face tokenizer.json.
#include <omp.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "core/error.h"
#include "io/whole_file.h"
#include "progress/task_progress.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_files.h"

namespace folio {

int tokenizer_command(Arguments& arguments) {
  const auto& positionals = arguments.positionals();
  const bool help = arguments.take_flag("help");
  if (help || positionals.empty()) {
    std::cout
        << "usage: folio tokenizer train --data FILE --vocab_size N --out tok.json "
           "[--pattern gpt2|cl100k|REGEX] [--threads N] [--force]\n\n"
           "Learns a byte-level BPE from the text in FILE, as GPT-2's tokenizer was made "
           "(GPT-2's\npre-tokenisation, the most frequent pair merged first), with N tokens: "
           "256 bytes,\nN - 257 merges and <|endoftext|> (the last id). Writes it as a "
           "tokenizer.json that Hugging\nFace tokenizers loads, and that folio tokenize and "
           "folio prepare take as --tokenizer.\n--pattern picks the pre-tokenisation: gpt2 "
           "(the default), cl100k (GPT-4's, also Llama 3's)\nor a regex of your own (PCRE2 "
           "syntax, Unicode properties). An existing tok.json is replaced only with --force.\n";
    if (help) return 0;
    std::fprintf(stderr, "folio: error: folio tokenizer needs its action: folio tokenizer train\n");
    return 2;
  }
  if (positionals[0] != "train")
    throw UsageError(
        "folio tokenizer has one action, train: folio tokenizer train --data FILE "
        "--vocab_size N --out tok.json");
  if (positionals.size() > 1)
    throw UsageError("unexpected argument '" + positionals[1] +
                     "': options are written --key VALUE (folio tokenizer --help)");
  const std::optional<std::string> data = arguments.take("data");
  const std::optional<std::string> vocab_text = arguments.take("vocab_size");
  const std::optional<std::string> out = arguments.take("out");
  const std::optional<std::string> threads_text = arguments.take("threads");
  const std::string pattern_text = arguments.take("pattern").value_or("gpt2");
  const bool force = arguments.take_flag("force");
  arguments.finish("tokenizer train",
                   {"data", "vocab_size", "out", "threads", "pattern", "force", "help"},
                   /*positionals_allowed=*/true);  // "train", checked above
  if (!data || !vocab_text || !out)
    throw UsageError("folio tokenizer train needs --data FILE --vocab_size N --out tok.json");
  const int vocab_size = parse_int_option("vocab_size", *vocab_text, 257, 1 << 24);
  const int threads = parse_threads_option(threads_text);

  const std::string pattern = pattern_text == "gpt2"     ? std::string(kGpt2Pattern)
                              : pattern_text == "cl100k" ? std::string(kCl100kPattern)
                                                         : pattern_text;
  if (pattern.empty()) throw UsageError("--pattern is empty: give gpt2, cl100k or a regex");
  // A word of letters and digits is a misspelt name ("gpt3"), not a regex anyone means: as one it
  // would split the text only where that word stands.
  if (std::all_of(pattern.begin(), pattern.end(), [](char c) { return std::isalnum(uint8_t(c)); }))
    throw UsageError("--pattern " + pattern + ": no such pattern; give gpt2, cl100k or a regex");
  try {
    PreTokenizer{pattern};  // a regex that does not compile is a bad value, before any work
  } catch (const Error& error) {
    throw UsageError(error.what());
  }
  check_new_output_file(*out, force, "--out");
  const std::string text = read_whole_file(*data, "check the path (--data FILE)");
  if (text.empty()) throw Error(*data + " is empty: train on a text file with some text in it");

  BpeTrainingReport report;
  TaskProgress progress("learning merges", 1, "", StatusLine::standard_error());
  const BpeDefinition tokenizer =
      train_byte_level_bpe(text, size_t(vocab_size), threads, &report,
                           [&](double fraction) { progress.set_done(fraction); }, pattern);
  progress.finish();
  const std::string json = tokenizer_json_text(tokenizer);
  write_whole_file(*out, json);
  std::fprintf(stderr,
               "folio: %zu tokens (%zu merges) from %zu distinct words in %.1f s (counting "
               "%.1f s, merging %.1f s) -> %s\n",
               tokenizer.tokens.size(), report.merges, report.words,
               report.count_seconds + report.merge_seconds, report.count_seconds,
               report.merge_seconds, out->c_str());
  if (tokenizer.tokens.size() < size_t(vocab_size))
    std::fprintf(stderr,
                 "folio: the text ran out of pairs to merge: %zu tokens, not %d (a larger text "
                 "gives more)\n",
                 tokenizer.tokens.size(), vocab_size);
  return 0;
}

}  // namespace folio
