#include "io/training_state.h"

#include <cmath>
#include <filesystem>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text_format.h"
#include "io/safetensors.h"

namespace folio {

std::string training_state_path(const std::string& out_dir) {
  return (std::filesystem::path(out_dir) / "state.safetensors").string();
}

void save_training_state(const std::string& path, const TrainingState& state) {
  const int64_t n = static_cast<int64_t>(state.parameters.size());
  // Infinity has no JSON or shortest-double spelling that reads back everywhere: say it in words.
  const std::string best = std::isinf(state.best_val_loss) ? "inf"
                                                           : shortest_double(state.best_val_loss);
  write_safetensors(path,
                    {{"parameters", {n}, state.parameters.data()},
                     {"adam_m", {n}, state.first_moment.data()},
                     {"adam_v", {n}, state.second_moment.data()}},
                    {{"format", kTrainingStateFormat},
                     {"config", config_to_json(state.config).dump()},
                     {"vocab", state.vocabulary.symbols_utf8()},
                     {"text_sha256", state.data_sha256},
                     {"steps_done", std::to_string(state.steps_done)},
                     {"optimizer_steps", std::to_string(state.optimizer_steps)},
                     {"best_val_loss", best},
                     {"elapsed_seconds", shortest_double(state.elapsed_seconds)}});
}

TrainingState load_training_state(const std::string& path) {
  if (!std::filesystem::exists(path))
    throw Error("no training state at " + path +
                ": --resume takes the out_dir of a run started by this folio (it writes "
                "state.safetensors every checkpoint_interval steps and at exit)");
  const SafetensorsFile file = SafetensorsFile::read(path);
  const auto& metadata = file.metadata();
  auto format = metadata.find("format");
  if (format == metadata.end() || format->second != kTrainingStateFormat)
    throw Error(path + " is not a folio training state (format " +
                (format == metadata.end() ? std::string("missing") : format->second) + ")");
  TrainingState state;
  try {
    apply_config_json(state.config, nlohmann::json::parse(metadata.at("config")), path);
    state.vocabulary = Vocabulary::from_utf8_symbols(metadata.at("vocab"));
    state.data_sha256 = metadata.at("text_sha256");
    state.steps_done = std::stoll(metadata.at("steps_done"));
    state.optimizer_steps = std::stoll(metadata.at("optimizer_steps"));
    const std::string best = metadata.at("best_val_loss");
    state.best_val_loss =
        best == "inf" ? std::numeric_limits<double>::infinity() : std::stod(best);
    state.elapsed_seconds = std::stod(metadata.at("elapsed_seconds"));
  } catch (const nlohmann::json::exception&) {
    throw Error(path + " has damaged metadata");
  } catch (const std::logic_error&) {  // out_of_range (missing key), invalid_argument (stoll)
    throw Error(path + " lacks or garbles a metadata entry");
  }
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
      state.second_moment.size() != state.parameters.size() || state.steps_done < 0)
    throw Error(path + " is inconsistent: its tensors differ in size");
  return state;
}

}  // namespace folio
