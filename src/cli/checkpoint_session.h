// What `folio eval` and `folio sample` share: a checkpoint opened on a backend, with the data
// (when given: a text encoded in the checkpoint's vocabulary, or token files of its tokenizer).
#pragma once

#include <memory>
#include <optional>
#include <string>

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

}  // namespace folio
