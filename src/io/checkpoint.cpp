#include "io/checkpoint.h"

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text_format.h"
#include "io/checkpoint_metadata.h"
#include "io/safetensors.h"
#include "io/torch_names.h"
#include "model/gpt.h"

namespace folio {

namespace {

// The out_dir a training state was written in, as `--resume` takes it.
std::string run_folder_of(const std::string& state_path) {
  const std::string folder = std::filesystem::path(state_path).parent_path().string();
  return folder.empty() ? "." : folder;
}

// The structure of a metadata-less file, read off its tensor names and shapes. Each value goes
// through the key table, so a hostile shape meets the same range checks as a typed flag.
Config infer_structure(const SafetensorsFile& file, Config config) {
  auto require = [&](const std::string& name) -> const SafetensorsTensor& {
    const SafetensorsTensor* tensor = file.find(name);
    if (tensor == nullptr || tensor->shape.size() < 1)
      throw Error("checkpoint " + file.path() + " has no folio metadata and no tensor " + name +
                  ": it is not a model of the seed's structure");
    return *tensor;
  };
  auto set = [&](const char* key, int64_t value) {
    try {
      set_config_value(config, key, std::to_string(value));
    } catch (const Error& error) {
      throw Error("checkpoint " + file.path() + " has no folio metadata, and its tensor shapes " +
                  "give an invalid structure: " + error.what());
    }
  };
  // Seed 004's AttentionModel names its tensors otherwise (torch_names); it is always post_norm.
  ModelShape naming;
  if (file.find("token_emb.weight") != nullptr) {
    naming.torch_names = TorchNames::kSeed004;
    config.torch_names = "seed004";
    config.block_order = "post_norm";
  }
  auto named = [&](const std::string& seed000_name) { return torch_name(naming, seed000_name); };
  const SafetensorsTensor& position = require(named("position_embedding_table.weight"));
  const SafetensorsTensor& token = require(named("token_embedding_table.weight"));
  if (position.shape.size() != 2 || token.shape.size() != 2)
    throw Error("checkpoint " + file.path() + ": the embedding tables are not matrices");
  set("block_size", position.shape[0]);
  set("n_embd", position.shape[1]);
  int64_t layers = 0;
  while (file.find(named("blocks." + std::to_string(layers) + ".ln1.weight"))) ++layers;
  int64_t heads = 0;
  while (file.find(torch_head_name(naming, 0, static_cast<int>(heads), 1, "weight"))) ++heads;
  const std::string first_key = torch_head_name(naming, 0, 0, 1, "weight");
  if (layers == 0 || heads == 0)
    throw Error("checkpoint " + file.path() + " has no " + named("blocks.0.ln1.weight") + " or " +
                first_key + ": it is not a model of the seed's structure");
  set("n_layer", layers);
  set("n_head", heads);
  set("head_size", require(first_key).shape[0]);
  naming.n_layer = config.n_layer;  // seed 004 names its final LayerNorm blocks.{n_layer}
  // Both factors are range-checked above, so the product cannot overflow.
  if (static_cast<int64_t>(config.head_size) * config.n_head == config.n_embd) config.head_size = 0;
  config.bias = file.find(named("ln_f.bias")) != nullptr;
  config.lm_head_bias = file.find(named("lm_head.bias")) != nullptr;
  config.qkv_bias = file.find(torch_head_name(naming, 0, 0, 1, "bias")) != nullptr;
  if (file.find(named("lm_head.weight")) == nullptr) config.tie_weights = true;
  return config;
}

// The most parameters the file's tensors could give: every parameter takes at least 2 bytes (F16
// or BF16). A bound, not a check of each tensor (from_seed_state_dict does that, naming it).
size_t loadable_values(const SafetensorsFile& file) {
  size_t bytes = 0;
  for (const SafetensorsTensor& tensor : file.tensors()) bytes += tensor.end - tensor.begin;
  return bytes / 2;
}

}  // namespace

void save_checkpoint(const std::string& path, const GPT& model, const Config& config,
                     const Tokenizer& tokenizer, int64_t step, double train_loss, double val_loss) {
  save_checkpoint(path, model.shape(), model.read_parameters(), config, tokenizer, step, train_loss,
                  val_loss);
}

void save_checkpoint(const std::string& path, const ModelShape& shape,
                     const std::vector<float>& flat, const Config& config,
                     const Tokenizer& tokenizer, int64_t step, double train_loss, double val_loss) {
  for (size_t i = 0; i < flat.size(); ++i)
    if (!std::isfinite(flat[i]))
      throw Error("refusing to write " + path + ": the parameters hold a non-finite value");
  const ParameterLayout layout(shape);
  std::map<std::string, std::string> metadata =
      folio_metadata(kCheckpointFormat, config, tokenizer);
  metadata["step"] = std::to_string(step);
  metadata["train_loss"] = shortest_double(train_loss);
  metadata["val_loss"] = shortest_double(val_loss);
  metadata["parameters"] = std::to_string(layout.saved_total());  // without padding
  // Written from views of `flat`, a chunk at a time: no second copy of the weights.
  write_safetensors(path, seed_state_dict_views(shape, layout, flat), metadata);
}

void refuse_training_state(const SafetensorsFile& file) {
  const auto format = file.metadata().find("format");
  if (format != file.metadata().end() && format->second == kTrainingStateFormat)
    throw Error(file.path() + " is folio's training state, for `folio train --resume " +
                run_folder_of(file.path()) +
                "`, not a model checkpoint: use ckpt.safetensors from the same folder");
}

bool is_folio_checkpoint(const SafetensorsFile& file) {
  const auto format = file.metadata().find("format");
  return format != file.metadata().end() && format->second == kCheckpointFormat;
}

LoadedCheckpoint load_checkpoint(const std::string& path, const Config& base_config,
                                 const Vocabulary* data_vocabulary) {
  // The data checksum is checked as the parameters are read (once), not on opening (twice).
  return load_checkpoint(SafetensorsFile::read(path, DataCheck::kInOnePass), base_config,
                         data_vocabulary);
}

LoadedCheckpoint load_checkpoint(const SafetensorsFile& file, const Config& base_config,
                                 const Vocabulary* data_vocabulary) {
  const std::string& path = file.path();
  LoadedCheckpoint result;
  result.path = path;
  result.file_size = file.file_size();
  const CheckpointMetadata metadata(file, "checkpoint " + path);
  if (metadata.format() == kCheckpointFormat) {
    result.written_by_folio = true;
    result.config = metadata.config();
    result.tokenizer = metadata.tokenizer();
    result.step = metadata.number_or<int64_t>("step", -1);
    result.train_loss = metadata.number_or<double>("train_loss", -1);
    result.val_loss = metadata.number_or<double>("val_loss", -1);
  } else {
    refuse_training_state(file);
    if (data_vocabulary == nullptr)
      throw Error("checkpoint " + path +
                  " was not written by folio, so it carries no vocabulary: pass --data FILE "
                  "with the text the model was trained on");
    result.config = infer_structure(file, base_config);
    result.tokenizer = *data_vocabulary;
  }
  validate_config(result.config);
  result.shape = ModelShape::from_config(result.config, result.tokenizer.size());
  const SafetensorsTensor* token =
      file.find(torch_name(result.shape, "token_embedding_table.weight"));
  if (token != nullptr && !token->shape.empty() && token->shape[0] != result.tokenizer.size())
    throw Error("checkpoint " + path + " has " + std::to_string(token->shape[0]) +
                " token embeddings, but the vocabulary has " + result.tokenizer.description() +
                ": use the text the model was trained on");
  const ParameterLayout layout(result.shape);
  // Refuse before allocating: a damaged config could otherwise ask for terabytes.
  if (layout.saved_total() > loadable_values(file))
    throw Error(
        "checkpoint " + path + " describes a model of " + std::to_string(layout.saved_total()) +
        " parameters, but its tensors hold at most " + std::to_string(loadable_values(file)) +
        " values: its config does not match its tensors (damaged?)");
  result.parameters =
      std::make_shared<FileParameters>(from_seed_state_dict(result.shape, layout, file));
  result.data_sha256 = file.stored_data_sha256();
  return result;
}

}  // namespace folio
