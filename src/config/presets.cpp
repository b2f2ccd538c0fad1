#include "config/presets.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace folio {

std::string preset_names() {
  std::string names;
  for (const Preset& preset : presets()) names += (names.empty() ? "" : ", ") + std::string(preset.name);
  return names;
}

Config load_config(const std::string& name_or_file, std::vector<std::string>* file_keys) {
  Config config;
  for (const Preset& preset : presets()) {
    if (name_or_file == preset.name) {
      apply_config_text(config, preset.text, "preset " + name_or_file);
      return config;
    }
  }
  if (std::filesystem::is_directory(name_or_file))
    throw Error("config '" + name_or_file + "' is a folder: give a preset (" + preset_names() +
                ") or a file of `key = value` lines");
  if (!std::filesystem::is_regular_file(name_or_file))
    throw Error("unknown config '" + name_or_file + "': not a preset (" + preset_names() +
                ") and no such file");
  std::ifstream file(name_or_file, std::ios::binary);
  if (!file) throw Error("cannot read config file " + name_or_file);
  std::ostringstream text;
  text << file.rdbuf();
  const std::vector<std::string> keys = apply_config_text(config, text.str(), name_or_file);
  if (file_keys != nullptr) file_keys->insert(file_keys->end(), keys.begin(), keys.end());
  return config;
}

}  // namespace folio
