// folio eval --ckpt FILE --data FILE.txt|DIR: the exact mean loss over every consecutive
// block_size window of each split (dropout off), as one JSON line.
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/checkpoint_session.h"
#include "cli/commands.h"
#include "core/error.h"
#include "data/batches.h"
#include "progress/task_progress.h"
#include "train/evaluate.h"

namespace folio {

namespace {

constexpr const char* kEvalHelp =
    "usage: folio eval --ckpt FILE [--data FILE.txt|DIR] [--batch_size N] [--device cpu|cuda|auto] "
    "[--threads N] [--quiet]\n\n"
    "Prints one JSON line, {\"block_size\":...,\"train_loss\":...,\"train_windows\":...,"
    "\"val_loss\":...,\"val_windows\":...}:\nthe mean loss over all consecutive "
    "non-overlapping block_size windows of each split, dropout off. DIR is a folder of token "
    "files (folio prepare) of the checkpoint's tokenizer.\nWithout --data the data is "
    "the one the checkpoint was trained on (its recorded data path, or tiny-Shakespeare, fetched "
    "if absent). Progress goes to stderr\nunless --quiet.\n";

}  // namespace

int eval_command(Arguments& arguments) {
  if (arguments.take_flag("help")) {
    std::cout << kEvalHelp;
    return 0;
  }
  const auto checkpoint_path = arguments.take("ckpt");
  if (!checkpoint_path) arguments.problem("folio eval needs --ckpt FILE");
  const bool quiet = arguments.take_flag("quiet");
  Config base;
  const std::vector<std::string> eval_options = {"ckpt", "quiet", "help"};
  arguments.apply_config_keys(base, eval_options);
  const std::string stray = arguments.positionals().empty() ? "" : arguments.positionals().front();
  arguments.finish("eval", eval_options, false,
                   "name the checkpoint with --ckpt " + stray + " and the text with --data FILE");
  CheckpointSession session =
      open_checkpoint(*checkpoint_path, base.data, base, /*needs_data=*/true);
  const std::string& data_path = session.data_path;
  const Config& config = session.checkpoint.config;
  check_dataset_fits(*session.data, config.block_size);
  const int batch_size = base.batch_size;
  GPT& model = *session.model;
  // Progress on stderr, so that stdout stays one JSON line.
  const size_t train_total = consecutive_window_count(session.data->train().size(), config.block_size);
  const size_t val_total = consecutive_window_count(session.data->val().size(), config.block_size);
  TaskProgress evaluating("evaluating " + data_path, double(train_total + val_total), "windows",
                          StatusLine::standard_error(), !quiet);
  size_t train_windows = 0, val_windows = 0;
  const double train_loss =
      split_loss(model, session.data->train(), config.block_size, batch_size, &train_windows,
                 [&](size_t done) { evaluating.set_done(double(done)); });
  const double val_loss =
      split_loss(model, session.data->val(), config.block_size, batch_size, &val_windows,
                 [&](size_t done) { evaluating.set_done(double(train_total + done)); });
  evaluating.finish();
  const nlohmann::json line = {{"train_loss", train_loss}, {"val_loss", val_loss},
                               {"train_windows", train_windows}, {"val_windows", val_windows},
                               {"block_size", config.block_size}};
  std::cout << line.dump() << std::endl;
  return 0;
}

}  // namespace folio
