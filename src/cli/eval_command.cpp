// folio eval --ckpt FILE --data FILE.txt: the exact mean loss over every consecutive
// block_size window of each split (dropout off), as one JSON line.
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/checkpoint_session.h"
#include "cli/commands.h"
#include "core/error.h"
#include "data/fetch.h"
#include "data/batches.h"
#include "train/evaluate.h"
#include "progress/task_progress.h"

namespace folio {

int eval_command(Arguments& arguments) {
  if (arguments.take_flag("help")) {
    std::cout << "usage: folio eval --ckpt FILE [--data FILE.txt] [--batch_size N] "
                 "[--device cpu|cuda|auto] [--threads N] [--quiet]\n\n"
                 "Prints {\"train_loss\": ..., \"val_loss\": ...}: the mean loss over all "
                 "consecutive non-overlapping block_size windows of each split, dropout off.\n";
    return 0;
  }
  const auto checkpoint_path = arguments.take("ckpt");
  if (!checkpoint_path) throw UsageError("folio eval needs --ckpt FILE");
  const bool quiet = arguments.take_flag("quiet");
  Config base;
  arguments.apply_config_keys(base, {"ckpt", "quiet", "help"});
  const std::string data_path = resolve_data_path(base.data);
  CheckpointSession session = open_checkpoint(*checkpoint_path, data_path, base);
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
