#include "io/training_state.h"

#include <cmath>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "core/text_format.h"
#include "io/checkpoint_metadata.h"
#include "io/run_directory.h"
#include "io/safetensors.h"

namespace folio {

std::string training_state_path(const std::string& out_dir) {
  return RunDirectory(out_dir).state_path();
}

namespace {

std::map<std::string, std::string> training_state_metadata(const TrainingState& state) {
  std::map<std::string, std::string> metadata =
      folio_metadata(kTrainingStateFormat, state.config, state.tokenizer);
  // Infinity has no JSON or shortest-double spelling that reads back everywhere: say it in words.
  metadata["best_val_loss"] =
      std::isinf(state.best_val_loss) ? "inf" : shortest_double(state.best_val_loss);
  metadata["text_sha256"] = state.data_sha256;
  metadata["steps_done"] = std::to_string(state.steps_done);
  metadata["optimizer_steps"] = std::to_string(state.optimizer_steps);
  metadata["elapsed_seconds"] = shortest_double(state.elapsed_seconds);
  metadata["world_size"] = std::to_string(state.world_size);
  return metadata;
}

}  // namespace

void save_training_state(const std::string& path, const TrainingState& state) {
  const int64_t n = static_cast<int64_t>(state.parameters.size());
  write_safetensors(path,
                    {{"parameters", {n}, state.parameters.data()},
                     {"adam_m", {n}, state.first_moment.data()},
                     {"adam_v", {n}, state.second_moment.data()}},
                    training_state_metadata(state));
}

namespace {

TrainingState read_training_state(const std::string& path) {
  // Checked whole on opening (DataCheck::kOnOpen), before any value is taken: --resume must never
  // start from a damaged state.
  const SafetensorsFile file = SafetensorsFile::read(path, DataCheck::kOnOpen);
  const CheckpointMetadata metadata(file, path);
  if (metadata.format() != kTrainingStateFormat)
    throw Error(path + " is not a folio training state (format " +
                (metadata.format().empty() ? std::string("missing") : metadata.format()) + ")");
  TrainingState state;
  state.config = metadata.config();
  state.tokenizer = metadata.tokenizer();
  state.data_sha256 = metadata.text("text_sha256");
  state.steps_done = metadata.number<int64_t>("steps_done");
  state.optimizer_steps = metadata.number<int64_t>("optimizer_steps");
  state.best_val_loss = metadata.text("best_val_loss") == "inf"
                            ? std::numeric_limits<double>::infinity()
                            : metadata.number<double>("best_val_loss");
  state.elapsed_seconds = metadata.number<double>("elapsed_seconds");
  state.world_size = metadata.number_or<int>("world_size", 0);
  auto tensor = [&](const char* name) {
    const SafetensorsTensor* t = file.find(name);
    if (t == nullptr || t->dtype != "F32" || t->shape.size() != 1)
      throw Error(path + " lacks the fp32 tensor " + name);
    return file.to_float32(*t);
  };
  state.parameters = tensor("parameters");
  state.first_moment = tensor("adam_m");
  state.second_moment = tensor("adam_v");
  if (state.first_moment.size() != state.parameters.size() ||
      state.second_moment.size() != state.parameters.size() || state.steps_done < 0 ||
      state.world_size < 0)
    throw Error(path + " is inconsistent: its tensors differ in size");
  return state;
}

}  // namespace

TrainingState load_training_state(const std::string& path) {
  if (!std::filesystem::exists(path))
    throw Error("no training state at " + path +
                ": --resume takes the out_dir of a run started by this folio (it writes "
                "state.safetensors every checkpoint_interval steps and at exit)");
  try {
    return read_training_state(path);
  } catch (const Error& error) {
    // The run cannot go on exactly; its best weights may still be sound.
    const std::string checkpoint =
        (std::filesystem::path(path).parent_path() / "ckpt.safetensors").string();
    throw Error(std::string(error.what()) +
                "; or start a new run from the run's checkpoint: " + "--init_from " + checkpoint);
  }
}

}  // namespace folio
