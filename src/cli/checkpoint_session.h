// What `folio eval` and `folio sample` share: a checkpoint opened on a backend, with the data
// (when given: a text encoded in the checkpoint's vocabulary, or token files of its tokenizer).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "data/dataset.h"
#include "io/checkpoint.h"
#include "model/gpt.h"

namespace folio {

struct CheckpointSession {
  LoadedCheckpoint checkpoint;
  std::optional<Dataset> data;
  std::string data_path;  // where `data` came from; empty without data
  std::unique_ptr<Backend> backend;
  std::unique_ptr<GPT> model;
};

// Loads `checkpoint_path`; `data_path` may be empty (needed for files not written by folio).
// With `needs_data` and no `data_path`, the text is the one the checkpoint records, or
// tiny-Shakespeare (fetched if absent), found after the checkpoint has been read.
// `base_config` supplies what a foreign file cannot say (e.g. activation), and the device and
// thread settings.
CheckpointSession open_checkpoint(const std::string& checkpoint_path, const std::string& data_path,
                                  const Config& base_config, bool needs_data = false);

// The config keys `given` on the command line of `command` (eval, sample, info, export), which
// takes its model from `checkpoint`, checked before they could be silently ignored: a model key
// (n_layer, block_size...) must equal a folio checkpoint's own (a file PyTorch wrote says no
// structure, so there the keys given are what it is read with); a recipe or run key must be one
// of `recipe_keys_read` (eval's batch_size...); host keys (data, device, threads...) are read
// by all. Throws one UsageError line per key that breaks these rules.
void check_keys_for_checkpoint(const std::vector<std::string>& given, const Config& values,
                               const LoadedCheckpoint& checkpoint, const std::string& command,
                               const std::vector<std::string>& recipe_keys_read);

}  // namespace folio
