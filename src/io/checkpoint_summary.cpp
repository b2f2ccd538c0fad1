#include "io/checkpoint_summary.h"

#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "config/presets.h"
#include "core/text_format.h"
#include "data/utf8.h"
#include "model/parameter_layout.h"

namespace folio {

namespace {

constexpr const char* kGroupNames[] = {"embeddings", "attention", "feed-forward", "norms",
                                       "head"};
constexpr size_t kListedDifferences = 4;  // more than this and no preset is said to match

size_t group_of(const std::string& tensor) {
  if (tensor.find("embedding_table") != std::string::npos) return 0;
  if (tensor.find(".sa.") != std::string::npos) return 1;
  if (tensor.find(".ffwd.") != std::string::npos) return 2;
  if (tensor.find(".ln1.") != std::string::npos || tensor.find(".ln2.") != std::string::npos ||
      tensor.rfind("ln_f.", 0) == 0)
    return 3;
  return 4;  // lm_head
}

// 10788929 -> "10,788,929"
std::string with_thousands(size_t value) {
  const std::string digits = std::to_string(value);
  std::string grouped;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return grouped;
}

std::string file_size_text(size_t bytes) {
  const double size = static_cast<double>(bytes);
  return size < 1e6 ? fixed(size / 1e3, 1) + " kB" : fixed(size / 1e6, 1) + " MB";
}

// The characters in order, with the invisible ones written as escapes: "\n !$&'...".
std::string printable_vocabulary(const Vocabulary& vocabulary) {
  std::string text;
  for (char32_t symbol : vocabulary.symbols()) {
    if (symbol == '\n') text += "\\n";
    else if (symbol == '\t') text += "\\t";
    else if (symbol == '\r') text += "\\r";
    else if (symbol == '\\') text += "\\\\";
    else if (symbol < 0x20 || symbol == 0x7f) text += describe_code_point(symbol);
    else append_utf8(text, symbol);
  }
  return text;
}

// "4 layers x 4 heads x 128 wide (head size 32), block 64, gelu, no biases, tied lm_head"
std::string structure_text(const ModelShape& shape) {
  std::ostringstream out;
  out << shape.n_layer << " layers x " << shape.n_head << " heads x " << shape.n_embd
      << " wide (head size " << shape.head_size << "), block " << shape.block_size << ", "
      << activation_name(shape.activation) << ", " << (shape.bias ? "biases" : "no biases") << ", "
      << (shape.tie_weights ? "lm_head tied to the token embedding" : "separate lm_head");
  // Seed 004's options, named only where they are on (seed 000's model reads as before).
  if (shape.qkv_bias) out << ", k/q/v biases";
  if (shape.block_order == BlockOrder::kPostNorm) out << ", post_norm blocks";
  if (shape.torch_names == TorchNames::kSeed004) out << ", seed 004's module names";
  return out.str();
}

std::vector<std::string> differing_keys(const Config& config, const Config& preset) {
  std::vector<std::string> differences;
  for (const ConfigKey& key : config_keys()) {
    const std::string group = key.group;
    if (group != "model" && group != "optimizer") continue;  // the recipe, not where it ran
    const std::string value = get_config_value(config, key);
    if (value != get_config_value(preset, key))
      differences.push_back(std::string(key.name) + " = " + value);
  }
  return differences;
}

}  // namespace

std::vector<ParameterGroup> parameter_groups(const ModelShape& shape) {
  std::vector<ParameterGroup> groups;
  for (const char* name : kGroupNames) groups.push_back({name, 0});
  const ParameterLayout layout(shape);
  for (const ParameterTensor& tensor : layout.tensors())  // the vocabulary padding is no parameter
    groups[group_of(tensor.name)].count += tensor.saved_size();
  return groups;
}

std::string matching_preset(const Config& config) {
  std::string closest;
  std::vector<std::string> fewest;
  for (const Preset& preset : presets()) {
    const std::vector<std::string> differences = differing_keys(config, load_config(preset.name));
    if (closest.empty() || differences.size() < fewest.size()) {
      closest = preset.name;
      fewest = differences;
    }
  }
  if (fewest.empty()) return closest;
  if (fewest.size() > kListedDifferences)
    return "none (closest: " + closest + ", " + std::to_string(fewest.size()) + " keys differ)";
  std::string text = closest + " with ";
  for (size_t i = 0; i < fewest.size(); ++i) text += (i ? ", " : "") + fewest[i];
  return text;
}

std::string summary_text(const CheckpointSummary& summary) {
  const LoadedCheckpoint& checkpoint = summary.checkpoint;
  std::ostringstream out;
  auto row = [&out](const char* label, const std::string& value) {
    char head[24];
    std::snprintf(head, sizeof(head), "%-13s", label);
    out << head << value << "\n";
  };
  row("file", checkpoint.path);
  row("size", file_size_text(checkpoint.file_size) + " (" + with_thousands(checkpoint.file_size) +
                  " bytes)");
  row("sha256", summary.file_sha256 + " (the whole file, as sha256sum prints it)");
  if (!checkpoint.data_sha256.empty())
    row("tensor data", "sha256 " + checkpoint.data_sha256 +
                           (checkpoint.written_by_folio ? " (recorded at save, checked on load)"
                                                        : " (of the tensors as stored)"));
  if (checkpoint.written_by_folio) {
    std::string when = "folio";
    if (checkpoint.step >= 0) when += ", step " + std::to_string(checkpoint.step);
    if (checkpoint.train_loss >= 0)
      when += ": train loss " + fixed(checkpoint.train_loss, 4) + ", val loss " +
              fixed(checkpoint.val_loss, 4);
    row("written by", when);
    row("preset", matching_preset(checkpoint.config));
  } else {
    row("written by", "another tool (no folio metadata): structure read off the tensors, "
                      "vocabulary from --data");
  }
  row("model", structure_text(checkpoint.shape));
  const std::vector<ParameterGroup> groups = parameter_groups(checkpoint.shape);
  size_t total = 0;
  for (const ParameterGroup& group : groups) total += group.count;
  row("parameters", with_thousands(total) + " (" +
                        shortest_double(static_cast<double>(total) / 1e6) + " M)");
  for (const ParameterGroup& group : groups) {
    char line[96];
    std::snprintf(line, sizeof(line), "  %-13s%12s  %5.1f%%", group.name.c_str(),
                  with_thousands(group.count).c_str(),
                  total ? 100.0 * static_cast<double>(group.count) / static_cast<double>(total)
                        : 0.0);
    out << line << (group.name == "head" && checkpoint.shape.tie_weights
                        ? "  (lm_head.weight is the token embedding)\n"
                        : "\n");
  }
  if (const Vocabulary* characters = checkpoint.tokenizer.characters())
    row("vocabulary",
        std::to_string(characters->size()) + " characters: " + printable_vocabulary(*characters));
  else
    row("tokenizer", checkpoint.tokenizer.description());
  out << "config\n";
  std::istringstream config_lines(config_to_text(checkpoint.config));
  for (std::string line; std::getline(config_lines, line);) out << "  " << line << "\n";
  return out.str();
}

nlohmann::json summary_json(const CheckpointSummary& summary) {
  const LoadedCheckpoint& checkpoint = summary.checkpoint;
  nlohmann::json groups = nlohmann::json::object();
  size_t total = 0;
  for (const ParameterGroup& group : parameter_groups(checkpoint.shape)) {
    groups[group.name] = group.count;
    total += group.count;
  }
  auto recorded = [](double value) { return value >= 0 ? nlohmann::json(value) : nullptr; };
  const Vocabulary* characters = checkpoint.tokenizer.characters();
  return {
      {"file", checkpoint.path},
      {"file_size", checkpoint.file_size},
      {"file_sha256", summary.file_sha256},
      {"data_sha256", checkpoint.data_sha256.empty() ? nlohmann::json(nullptr)
                                                     : nlohmann::json(checkpoint.data_sha256)},
      {"written_by_folio", checkpoint.written_by_folio},
      {"step", checkpoint.step >= 0 ? nlohmann::json(checkpoint.step) : nlohmann::json(nullptr)},
      {"train_loss", recorded(checkpoint.train_loss)},
      {"val_loss", recorded(checkpoint.val_loss)},
      {"preset", checkpoint.written_by_folio ? nlohmann::json(matching_preset(checkpoint.config))
                                             : nlohmann::json(nullptr)},
      {"parameters", total},
      {"parameter_groups", groups},
      {"vocab_size", checkpoint.tokenizer.size()},
      // "characters" (and the characters under "vocabulary") or "byte-level BPE".
      {"tokenizer", characters ? "characters" : "byte-level BPE"},
      {"vocabulary", characters ? nlohmann::json(characters->symbols_utf8()) : nullptr},
      {"config", config_to_json(checkpoint.config)},
  };
}

}  // namespace folio
