// Model checkpoints: fp32 safetensors files with tensors named as the seed's PyTorch state_dict
// (model/torch_names.h), and in __metadata__ the config (JSON), the vocabulary (its characters in
// order), the step and the losses. PyTorch's load_state_dict takes the tensors as they are.
//
// folio also reads files written from a PyTorch model of the seed's structure
// (safetensors.torch.save_file(model.state_dict(), ...)), which carry no metadata: the structure
// (n_layer, n_head, n_embd, head_size, block_size, bias, tie_weights) is read off the tensors,
// the rest of the config comes from the command line, the vocabulary from --data.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/vocabulary.h"
#include "io/parameter_source.h"
#include "model/model_shape.h"
#include "tokenizer/tokenizer.h"

namespace folio {

class GPT;
class SafetensorsFile;

struct LoadedCheckpoint {
  std::string path;
  Config config;
  Tokenizer tokenizer;
  ModelShape shape;
  // Flat, in the ParameterLayout of `shape`: read from the file when written into a model
  // (GPT::write_parameters) or read_all(); the values, and the data checksum, are checked then,
  // in the same single pass over the file: a model they went into must not be used unless that
  // returned (see ParameterSource::write).
  std::shared_ptr<const ParameterSource> parameters;
  bool written_by_folio = false;
  int64_t step = -1;                      // -1: not recorded
  double train_loss = -1, val_loss = -1;  // -1: not recorded
  size_t file_size = 0;
  std::string data_sha256;  // as the file records it (checked with the values); "" without one
};

// Throws when `file` is folio's training state (state.safetensors), naming the checkpoint to use.
void refuse_training_state(const SafetensorsFile& file);
// True for a model checkpoint written by folio (which carries its config and vocabulary).
bool is_folio_checkpoint(const SafetensorsFile& file);

// Writes atomically (see write_safetensors); a failure leaves the previous file intact.
void save_checkpoint(const std::string& path, const GPT& model, const Config& config,
                     const Tokenizer& tokenizer, int64_t step, double train_loss, double val_loss);
// The same from flat parameters in the ParameterLayout of `shape` (what `folio import` writes).
void save_checkpoint(const std::string& path, const ModelShape& shape,
                     const std::vector<float>& parameters, const Config& config,
                     const Tokenizer& tokenizer, int64_t step, double train_loss, double val_loss);

// Reads the file's header and checks everything it says (metadata, config, tensor names, shapes
// and dtypes, the header checksum); the values stay in the file until `parameters` is written,
// which checks the data checksum as it reads them (DataCheck::kInOnePass).
// `base_config` and `data_vocabulary` are used only for files without folio metadata; then
// `data_vocabulary` is required (nullptr is an error saying to pass --data): such files are
// char models of the seed's structure.
LoadedCheckpoint load_checkpoint(const std::string& path, const Config& base_config,
                                 const Vocabulary* data_vocabulary);
// The same from a file already read (or parsed from memory, as the fuzz tests do); its data
// checksum is checked as `file` was opened to (DataCheck).
LoadedCheckpoint load_checkpoint(const SafetensorsFile& file, const Config& base_config,
                                 const Vocabulary* data_vocabulary);

}  // namespace folio
