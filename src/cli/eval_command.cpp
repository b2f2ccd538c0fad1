// folio eval --ckpt FILE --data FILE.txt|DIR: the exact mean loss over every consecutive
// block_size window of each split (dropout off), as one JSON line.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/arguments.h"
#include "cli/checkpoint_session.h"
#include "cli/commands.h"
#include "core/error.h"
#include "data/batches.h"
#include "progress/task_progress.h"
#include "train/evaluate.h"

namespace folio {

namespace {

constexpr const char* kEvalHelp =
    "usage: folio eval --ckpt FILE [--data FILE.txt|DIR] [--split train|val|both] "
    "[--max_windows N] [--batch_size N] [--train_fraction F] [--device cpu|cuda|auto] [--dtype D] "
    "[--threads N] [--quiet]\n\n"
    "Prints one JSON line, {\"block_size\":...,\"train_loss\":...,\"train_windows\":...,"
    "\"val_loss\":...,\"val_windows\":...}:\nthe mean loss over all consecutive "
    "non-overlapping block_size windows of each split, dropout off. DIR is a folder of token "
    "files (folio prepare) of the checkpoint's tokenizer.\nWithout --data the data is "
    "the one the checkpoint was trained on (its recorded data path, or tiny-Shakespeare, fetched "
    "if absent). --split evaluates one\nsplit alone (its keys alone in the line), --max_windows "
    "the first N windows of each split (a corpus of billions\nof tokens has millions of "
    "windows). A text is split where the checkpoint's run split it, so that val is the text it "
    "validated on;\n--train_fraction F splits it at F instead. Progress goes to stderr unless "
    "--quiet.\n";

}  // namespace

int eval_command(Arguments& arguments) {
  if (arguments.take_flag("help")) {
    std::cout << kEvalHelp;
    return 0;
  }
  const auto checkpoint_path = arguments.take("ckpt");
  if (!checkpoint_path) arguments.problem("folio eval needs --ckpt FILE");
  const bool quiet = arguments.take_flag("quiet");
  const std::string split = arguments.take("split").value_or("both");
  if (split != "train" && split != "val" && split != "both")
    arguments.problem("--split must be train, val or both, not '" + split + "'");
  size_t max_windows = SIZE_MAX;  // every window
  if (auto v = arguments.take_int("max_windows", 1, INT32_MAX)) max_windows = size_t(*v);
  Config base;
  const std::vector<std::string> eval_options = {"ckpt", "quiet", "split", "max_windows", "help"};
  const std::vector<std::string> given = arguments.apply_config_keys(base, eval_options, "eval");
  const std::string stray = arguments.positionals().empty() ? "" : arguments.positionals().front();
  arguments.finish("eval", eval_options, false,
                   "name the checkpoint with --ckpt " + stray + " and the text with --data FILE");
  // The split is the checkpoint's own, so that val is the text its run validated on, unless
  // --train_fraction says otherwise (a token folder is split already: it says nothing there).
  std::optional<double> train_fraction;
  if (train_fraction_given(given, base.data)) train_fraction = base.train_fraction;
  CheckpointSession session =
      open_checkpoint(*checkpoint_path, base, DataUse::kEvaluation, train_fraction);
  check_keys_for_checkpoint(
      given, base, session.checkpoint, "eval",
      {"batch_size", "train_fraction", "dtype", "tf32", "data", "tokenizer", "device", "threads"});
  const std::string& data_path = session.data_path;
  const Config& config = session.checkpoint.config;
  check_dataset_fits(*session.data, config.block_size);
  const int batch_size = base.batch_size;
  GPT& model = *session.model;
  struct Split {
    const char* name;
    const TokenSequence& tokens;
    size_t windows;  // to evaluate
  };
  std::vector<Split> splits;
  for (const auto& [name, tokens] :
       {std::pair<const char*, const TokenSequence&>{"train", session.data->train()},
        {"val", session.data->val()}})
    if (split == "both" || split == name)
      splits.push_back(
          Split{name, tokens,
                std::min(consecutive_window_count(tokens.size(), config.block_size), max_windows)});
  // Progress on stderr, so that stdout stays one JSON line.
  size_t total = 0;
  for (const Split& s : splits) total += s.windows;
  TaskProgress evaluating("evaluating " + data_path, double(total), "windows",
                          StatusLine::standard_error(), !quiet);
  nlohmann::json line = {{"block_size", config.block_size}};
  size_t before = 0;  // windows of the splits done
  for (const Split& s : splits) {
    size_t windows = 0;
    line[std::string(s.name) + "_loss"] =
        split_loss(model, s.tokens, config.block_size, batch_size, max_windows, &windows,
                   [&](size_t done) { evaluating.set_done(double(before + done)); });
    line[std::string(s.name) + "_windows"] = windows;
    before += windows;
  }
  evaluating.finish();
  std::cout << line.dump() << std::endl;
  return 0;
}

}  // namespace folio
