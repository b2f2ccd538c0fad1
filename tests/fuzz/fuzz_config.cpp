// libFuzzer target: the config parsers. The first byte picks the entry point: a config file's
// `key = value` lines (apply_config_text), a checkpoint's JSON config (apply_config_json), or one
// key of the table set from text (set_config_value). A refusal must be one folio::Error; an
// accepted config must survive validation or refuse there, and read back unchanged through the
// JSON that checkpoints store and through get_config_value/set_config_value.
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "core/error.h"
#include "fuzz_checks.h"

namespace {

using folio::fuzz::check;
using folio::fuzz::check_message;

// Quoted values are cut to 80 bytes (4 per escaped byte), key help texts are short.
constexpr size_t kLongestMessage = 1000;

void check_round_trips(const folio::Config& config) {
  const nlohmann::json json = folio::config_to_json(config);
  folio::Config from_json;
  folio::apply_config_json(from_json, json, "round trip");
  check(folio::config_to_json(from_json) == json);
  folio::Config from_values;
  for (const folio::ConfigKey& key : folio::config_keys())
    folio::set_config_value(from_values, key.name, folio::get_config_value(config, key));
  check(folio::config_to_json(from_values) == json);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t mode = data[0] % 3, key_index = data[1];
  const std::string text(reinterpret_cast<const char*>(data) + 2, size - 2);
  folio::Config config;
  try {
    if (mode == 0) {
      folio::apply_config_text(config, text, "fuzz.conf");
    } else if (mode == 1) {
      const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (json.is_discarded()) return 0;  // not JSON: load_checkpoint refuses it before this
      folio::apply_config_json(config, json, "fuzz.json");
    } else {
      const auto& keys = folio::config_keys();
      folio::set_config_value(config, keys[key_index % keys.size()].name, text);
    }
  } catch (const folio::Error& error) {
    check_message(error, kLongestMessage);
    return 0;
  }
  check_round_trips(config);
  try {
    folio::validate_config(config);
  } catch (const folio::Error& error) {
    check_message(error, kLongestMessage);
  }
  return 0;
}
