// Named presets (configs/*.conf, compiled into the binary) and `--config NAME|FILE` resolution.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace folio {

struct Preset {
  const char* name;
  const char* text;  // `key = value` lines
};

const std::vector<Preset>& presets();  // generated from configs/*.conf

// "baby, nanogpt_char, seed004, shakespeare_char, tiny"
std::string preset_names();

// Defaults, then the preset named `name_or_file`, or the file at that path. `file_keys`, when
// given, gets the keys a file sets (the user's choices; a preset's are its defaults: none).
Config load_config(const std::string& name_or_file, std::vector<std::string>* file_keys = nullptr);

}  // namespace folio
