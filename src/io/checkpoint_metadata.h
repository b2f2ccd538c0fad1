// The metadata folio writes into the safetensors files it makes (the model checkpoint
// ckpt.safetensors and the training state state.safetensors), written and read in one place:
//   format  which of the two files it is (kCheckpointFormat, kTrainingStateFormat)
//   config  the run's Config as JSON (every key of config_keys.cpp)
//   vocab      a char model's vocabulary: its characters in order, UTF-8
//   tokenizer  a BPE model's tokenizer: the text of its tokenizer.json (GPT-2's is ~2 MB, well
//              under the 100 MiB safetensors header limit of io/safetensors.cpp)
// plus numbers each file adds (step, losses, counters), read here too.
#pragma once

#include <charconv>
#include <cmath>
#include <map>
#include <string>

#include "config/config.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace folio {

class SafetensorsFile;

inline constexpr const char* kCheckpointFormat = "folio-gpt-1";
inline constexpr const char* kTrainingStateFormat = "folio-train-state-1";

// The entries every folio file starts its metadata with.
std::map<std::string, std::string> folio_metadata(const char* format, const Config& config,
                                                  const Tokenizer& tokenizer);

class CheckpointMetadata {
 public:
  // `name` is how errors name the file ("checkpoint out/ckpt.safetensors").
  CheckpointMetadata(const SafetensorsFile& file, std::string name);

  // The file's format entry, "" when it has none (a file from another tool).
  const std::string& format() const { return format_; }
  // The config and the tokenizer (the `tokenizer` entry when present, else `vocab`); throw
  // folio::Error naming the file when missing or damaged.
  Config config() const;
  Tokenizer tokenizer() const;
  // A required entry; throws naming the file and the entry when it is missing.
  const std::string& text(const std::string& key) const;
  // A required number (integers read as integers); throws when missing or malformed.
  template <typename Number>
  Number number(const std::string& key) const {
    Number value{};
    if (!parse(text(key), value))
      throw Error(name_ + " has a malformed metadata entry " + key + ": '" + text(key) + "'");
    return value;
  }
  // A recorded number, or `fallback` when the entry is absent, malformed or not finite.
  template <typename Number>
  Number number_or(const std::string& key, Number fallback) const {
    auto it = entries_.find(key);
    Number value{};
    return it != entries_.end() && parse(it->second, value) ? value : fallback;
  }

 private:
  template <typename Number>
  static bool parse(const std::string& text, Number& value) {
    const char* last = text.data() + text.size();
    const auto [end, error] = std::from_chars(text.data(), last, value);
    if constexpr (std::is_floating_point_v<Number>) {
      if (error == std::errc() && !std::isfinite(value)) return false;
    }
    return error == std::errc() && end == last;
  }

  const std::string name_;
  const std::map<std::string, std::string>& entries_;
  std::string format_;
};

}  // namespace folio
