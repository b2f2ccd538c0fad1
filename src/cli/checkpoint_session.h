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

// What a command does with the data (base_config.data, when given):
//   kVocabularyOfForeignFiles  sample: a file PyTorch wrote carries no vocabulary, so it comes from
//                              the text; a folio checkpoint carries its own and no text is read;
//   kEvaluation                eval: the text (or token folder) to evaluate on; without
//                              --data the one the checkpoint records, or tiny-Shakespeare
//                              (fetched if absent), found after the checkpoint has been read.
enum class DataUse { kVocabularyOfForeignFiles, kEvaluation };

// Loads `checkpoint_path` on the backend base_config names (device, threads, dtype).
// `base_config` also supplies what a foreign file cannot say (e.g. activation). The text is split
// at `train_fraction` when given, else at the checkpoint's own (a foreign file's: base_config's).
CheckpointSession open_checkpoint(const std::string& checkpoint_path, const Config& base_config,
                                  DataUse data_use,
                                  std::optional<double> train_fraction = std::nullopt);

// The config keys `given` on the command line of `command` (eval, sample, info, export), which
// takes its model from `checkpoint`, checked before they could be silently ignored: a model key
// (n_layer, block_size...) must equal a folio checkpoint's own (a file PyTorch wrote says no
// structure, so there the keys given are what it is read with); any other key must be one of
// `keys_read` (eval's batch_size, device, threads...), and `data` one of them only where the
// command reads a text (eval always; sample, info and export for the vocabulary of a foreign
// file alone). Throws one UsageError line per key that breaks these rules.
void check_keys_for_checkpoint(const std::vector<std::string>& given, const Config& values,
                               const LoadedCheckpoint& checkpoint, const std::string& command,
                               const std::vector<std::string>& keys_read);

}  // namespace folio
