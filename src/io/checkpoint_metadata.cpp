#include "io/checkpoint_metadata.h"

#include <nlohmann/json.hpp>

#include "io/safetensors.h"

namespace folio {

std::map<std::string, std::string> folio_metadata(const char* format, const Config& config,
                                                  const Tokenizer& tokenizer) {
  std::map<std::string, std::string> metadata = {
      {"format", format},
      // A path in the config need not be UTF-8 (a Latin-1 file name): JSON cannot hold such
      // bytes, so they are stored as U+FFFD rather than failing the save after training.
      {"config",
       config_to_json(config).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)},
  };
  if (const Vocabulary* characters = tokenizer.characters())
    metadata["vocab"] = characters->symbols_utf8();
  else
    metadata["tokenizer"] = tokenizer.tokenizer_json();
  return metadata;
}

CheckpointMetadata::CheckpointMetadata(const SafetensorsFile& file, std::string name)
    : name_(std::move(name)), entries_(file.metadata()) {
  auto format = entries_.find("format");
  if (format != entries_.end()) format_ = format->second;
}

const std::string& CheckpointMetadata::text(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) throw Error(name_ + " lacks its " + key + " metadata");
  return it->second;
}

Config CheckpointMetadata::config() const {
  Config config;
  try {
    apply_config_json(config, nlohmann::json::parse(text("config")), name_);
  } catch (const nlohmann::json::exception&) {
    throw Error(name_ + " has damaged metadata: its config is not JSON");
  }
  return config;
}

Tokenizer CheckpointMetadata::tokenizer() const {
  if (entries_.count("tokenizer")) {
    try {
      return Tokenizer::from_tokenizer_json(text("tokenizer"), name_ + "'s tokenizer");
    } catch (const Error& error) {
      throw Error(std::string(error.what()) + " (the checkpoint's stored tokenizer is damaged)");
    }
  }
  Vocabulary vocabulary;
  try {
    vocabulary = Vocabulary::from_utf8_symbols(text("vocab"));
  } catch (const Error& error) {
    throw Error(name_ + ": " + error.what());
  }
  if (vocabulary.size() == 0) throw Error(name_ + " has an empty vocabulary: it is damaged");
  return vocabulary;
}

}  // namespace folio
