#include "cli/checkpoint_session.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "data/fetch.h"
#include "io/safetensors.h"

namespace folio {

namespace {

// The text for a checkpoint that came without --data: the one it records (its config's data
// key), or tiny-Shakespeare when it records none (fetched only now that the checkpoint has been
// read and found sound).
std::string recorded_data_path(const LoadedCheckpoint& checkpoint) {
  const std::string& recorded = checkpoint.config.data;
  if (recorded.empty()) return resolve_data_path("");
  if (!std::filesystem::exists(recorded))
    throw Error("checkpoint " + checkpoint.path + " was trained on " + recorded +
                ", which is not there from this folder: pass --data FILE with that text");
  return recorded;
}

}  // namespace

CheckpointSession open_checkpoint(const std::string& checkpoint_path, const Config& base_config,
                                  DataUse data_use, std::optional<double> train_fraction) {
  const bool evaluates = data_use == DataUse::kEvaluation;
  CheckpointSession session;
  // The header only: the values go from the file straight into the model below, their checksum
  // checked on the same pass; if it fails, write_into throws and the model is never used.
  const SafetensorsFile file = SafetensorsFile::read(checkpoint_path, DataCheck::kInOnePass);
  const bool written_by_folio = is_folio_checkpoint(file);
  if (written_by_folio) {
    // It has its own vocabulary: the text is read (or fetched) only once the model holds the
    // checkpoint's values, all found finite.
    session.checkpoint = load_checkpoint(file, base_config, nullptr);
  } else {
    // A file from PyTorch carries no vocabulary: it comes from the text, fetched only for a
    // file that looks like a model.
    refuse_training_state(file);
    session.data_path = base_config.data;
    if (session.data_path.empty() && evaluates) {
      if (file.find("token_embedding_table.weight") == nullptr)
        throw Error("checkpoint " + checkpoint_path +
                    " has no folio metadata and no tensor "
                    "token_embedding_table.weight: it is not a model folio can read");
      session.data_path = resolve_data_path("");
    }
    if (!session.data_path.empty())
      session.data = Dataset::from_text(load_text_dataset(
          session.data_path, train_fraction.value_or(base_config.train_fraction)));
    session.checkpoint = load_checkpoint(
        file, base_config, session.data ? session.data->tokenizer().characters() : nullptr);
  }
  session.backend =
      make_backend(base_config.device, base_config.threads, {base_config.dtype, base_config.tf32});
  session.model = std::make_unique<GPT>(*session.backend, session.checkpoint.shape);
  session.checkpoint.parameters->write_into(*session.model);
  if (written_by_folio && evaluates) {
    session.data_path =
        base_config.data.empty() ? recorded_data_path(session.checkpoint) : base_config.data;
    session.data = load_dataset(session.data_path,
                                train_fraction.value_or(session.checkpoint.config.train_fraction),
                                base_config.tokenizer, &session.checkpoint.tokenizer,
                                "checkpoint " + checkpoint_path);
  }
  return session;
}

void check_keys_for_checkpoint(const std::vector<std::string>& given, const Config& values,
                               const LoadedCheckpoint& checkpoint, const std::string& command,
                               const std::vector<std::string>& keys_read) {
  std::string problems;
  const auto add = [&](const std::string& problem) {
    if (!problems.empty()) problems += '\n';
    problems += problem;
  };
  for (const std::string& name : given) {
    const ConfigKey& key = *find_config_key(name);
    if (key.scope == ConfigScope::kModel) {
      if (!checkpoint.written_by_folio) continue;
      const std::string own = get_config_value(checkpoint.config, key);
      const std::string asked = get_config_value(values, key);
      if (own != asked)
        add("--" + name + " " + asked + " is not the model in " + checkpoint.path + " (" + name +
            " = " + own + "): folio " + command + " takes the model from the checkpoint; drop --" +
            name);
      continue;
    }
    if (std::find(keys_read.begin(), keys_read.end(), name) != keys_read.end()) continue;
    if (name == "data" && !checkpoint.written_by_folio) continue;  // its vocabulary
    if (name == "data")
      add("--data does nothing in folio " + command + ": " + checkpoint.path +
          " carries its own vocabulary (a text is needed only for files written by PyTorch); "
          "drop it");
    else
      add("--" + name + " does nothing in folio " + command + ": drop it (folio " + command +
          " --help lists what it reads)");
  }
  if (!problems.empty()) throw UsageError(problems);
}

}  // namespace folio
