// libFuzzer target: a Hugging Face GPT-2 config.json, as `folio import --hf` and `folio train
// --init_from DIR` read it (config_from_hf_json on top of the gpt2 preset, then validate_config).
// A refusal must be one folio::Error; a config that passes validation must come back unchanged
// through the config.json that `folio export` writes for it.
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "core/error.h"
#include "fuzz_checks.h"
#include "io/hf_gpt2.h"
#include "model/model_shape.h"

namespace {

using folio::fuzz::check;
using folio::fuzz::check_message;

constexpr size_t kLongestMessage = 1000;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json hf = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (hf.is_discarded()) return 0;  // not JSON: read_hf_gpt2 refuses it before this
  folio::Config config;
  try {
    config = folio::config_from_hf_json(hf, "fuzz/config.json", folio::hf_gpt2_base_config());
    folio::validate_config(config);
  } catch (const folio::Error& error) {
    check_message(error, kLongestMessage);
    return 0;
  }
  const folio::ModelShape shape = folio::ModelShape::from_config(config, 50257);
  const nlohmann::json written = folio::hf_config_json(config, shape, -1);
  const folio::Config again =
      folio::config_from_hf_json(written, "written", folio::hf_gpt2_base_config());
  check(folio::config_to_json(again) == folio::config_to_json(config));
  return 0;
}
