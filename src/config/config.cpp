// Parsing, validation and printing of configs, all driven by the key table (config_keys.cpp).
#include "config/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/printable.h"
#include "core/text_format.h"

namespace folio {

namespace {

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

std::string range_text(const ConfigKey& key) {
  std::ostringstream out;
  out << (key.min_exclusive ? "(" : "[") << shortest_double(key.min) << ", " << shortest_double(key.max)
      << (key.max_exclusive ? ")" : "]");
  return out.str();
}

[[noreturn]] void bad_value(const ConfigKey& key, const std::string& value,
                            const std::string& why) {
  throw Error("config key " + std::string(key.name) + ": '" + printable(value) + "' " + why);
}

// What a key accepts, in words: "an integer in [1, 2147483647]", "true or false", ...
std::string accepted_values(const ConfigKey& key) {
  if (key.choices != nullptr) return std::string("one of ") + key.choices;
  switch (key.member.index()) {
    case 0: return "an integer in " + range_text(key);
    case 1: return "an integer in [0, 2^64 - 1]";
    case 2: return "a number in " + range_text(key);
    case 3: return "true or false (also 1/0, yes/no, on/off)";
    default: return "any text";
  }
}

// A value of the wrong type: says what the key takes and what it means.
[[noreturn]] void bad_type(const ConfigKey& key, const std::string& value, const std::string& why) {
  bad_value(key, value, why + "; it takes " + accepted_values(key) + " (" + key.help + ")");
}

void check_range(const ConfigKey& key, const std::string& text, double value) {
  const bool above = key.max_exclusive ? value >= key.max : value > key.max;
  const bool below = key.min_exclusive ? value <= key.min : value < key.min;
  if (below || above)
    bad_value(key, text, "is out of range " + range_text(key) + " (" + key.help + ")");
}

long long parse_integer(const ConfigKey& key, const std::string& text) {
  if (text.empty()) bad_type(key, text, "is empty");
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (end != text.c_str() + text.size()) bad_type(key, text, "is not an integer");
  if (errno == ERANGE) bad_type(key, text, "is too large");
  return value;
}

double parse_double(const ConfigKey& key, const std::string& text) {
  if (text.empty()) bad_type(key, text, "is empty");
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) bad_type(key, text, "is not a number");
  // Overflow gives an infinity; ERANGE alone is also set on underflow, whose value (a subnormal
  // or 0) is finite and taken as it is.
  if (!std::isfinite(value)) bad_type(key, text, "is not a finite number");
  return value;
}

bool parse_bool(const ConfigKey& key, const std::string& text) {
  std::string lower = text;
  // std::tolower is undefined for negative chars: bytes >= 0x80 of hostile text must not reach it.
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "true" || lower == "1" || lower == "yes" || lower == "on") return true;
  if (lower == "false" || lower == "0" || lower == "no" || lower == "off") return false;
  bad_type(key, text, "is not a boolean");
}

bool is_choice(std::string_view choices, const std::string& value) {
  while (true) {
    const size_t bar = choices.find('|');
    if (choices.substr(0, bar) == value) return true;
    if (bar == std::string_view::npos) return false;
    choices.remove_prefix(bar + 1);
  }
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string nearest_word(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(3, word.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) best_distance = distance, best = candidate;
  }
  return best;
}

std::string nearest_config_key(const std::string& name) {
  std::vector<std::string> names;
  for (const ConfigKey& key : config_keys()) names.push_back(key.name);
  return nearest_word(name, names);
}

static const ConfigKey& require_key(const std::string& name) {
  const ConfigKey* key = find_config_key(name);
  if (key != nullptr) return *key;
  const std::string guess = nearest_config_key(name);
  throw Error("unknown config key '" + printable(name) + "'" +
              (guess.empty() ? "" : " (did you mean " + guess + "?)") +
              "; `folio train --help` lists every key");
}

void set_config_value(Config& config, const std::string& name, const std::string& raw_value) {
  const ConfigKey& key = require_key(name);
  const std::string value = trim(raw_value);
  std::visit(
      [&](auto member) {
        using Field = std::remove_reference_t<decltype(config.*member)>;
        if constexpr (std::is_same_v<Field, int>) {
          const long long parsed = parse_integer(key, value);
          check_range(key, value, static_cast<double>(parsed));
          config.*member = static_cast<int>(parsed);
        } else if constexpr (std::is_same_v<Field, uint64_t>) {
          // strtoull would skip other white space and wrap "-1" to 2^64 - 1: insist on a digit.
          if (value.empty() || !std::isdigit(static_cast<unsigned char>(value[0])))
            bad_type(key, value, "is not an unsigned integer");
          errno = 0;
          char* end = nullptr;
          const unsigned long long parsed = std::strtoull(value.c_str(), &end, 10);
          if (end != value.c_str() + value.size())
            bad_type(key, value, "is not an unsigned integer");
          if (errno == ERANGE) bad_type(key, value, "is too large");
          config.*member = parsed;
        } else if constexpr (std::is_same_v<Field, double>) {
          const double parsed = parse_double(key, value);
          check_range(key, value, parsed);
          config.*member = parsed;
        } else if constexpr (std::is_same_v<Field, bool>) {
          config.*member = parse_bool(key, value);
        } else {
          if (key.choices != nullptr && !is_choice(key.choices, value))
            bad_type(key, value, "is not a choice it has");
          config.*member = value;
        }
      },
      key.member);
}

std::string get_config_value(const Config& config, const ConfigKey& key) {
  return std::visit(
      [&](auto member) -> std::string {
        const auto& field = config.*member;
        using Field = std::remove_cvref_t<decltype(field)>;
        if constexpr (std::is_same_v<Field, bool>) return field ? "true" : "false";
        else if constexpr (std::is_same_v<Field, double>) return shortest_double(field);
        else if constexpr (std::is_same_v<Field, std::string>) return field;
        else return std::to_string(field);
      },
      key.member);
}

std::vector<std::string> apply_config_text(Config& config, const std::string& text,
                                           const std::string& origin) {
  // A config is text: a NUL byte means a checkpoint or another binary file was named instead.
  if (text.find('\0') != std::string::npos)
    throw Error(origin +
                " is not a text config file (it holds NUL bytes): give a file of "
                "`key = value` lines, as configs/*.conf are");
  // Editors on Windows may begin a UTF-8 file with a byte-order mark; it is not part of a key.
  constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";
  std::istringstream lines(text.starts_with(kByteOrderMark) ? text.substr(kByteOrderMark.size())
                                                            : text);
  std::string line;
  int line_number = 0;
  // Each key's first line and value: a key set twice is a mistake (which one was meant?).
  std::map<std::string, std::pair<int, std::string>> seen;
  std::vector<std::string> keys_set;
  while (std::getline(lines, line)) {
    ++line_number;
    const std::string where = origin + ":" + std::to_string(line_number) + ": ";
    // A comment runs from a # to the end of the line, but not from a # inside a quoted value
    // (out_dir = "run #2"), so the value is read before its comment is cut off.
    const auto first_hash = line.find('#');
    if (first_hash != std::string::npos && first_hash < line.find('=')) line.resize(first_hash);
    line = trim(line);
    if (line.empty()) continue;
    const auto equals = line.find('=');
    if (equals == std::string::npos)
      throw Error(where + "expected `key = value`, got '" + printable(line) + "'");
    std::string value = trim(line.substr(equals + 1));
    if (!value.empty() && value.front() == '"') {
      const auto closing = value.find('"', 1);
      if (closing == std::string::npos)
        throw Error(where + "the quote that begins the value " + printable(value) +
                    " is not closed: end the value with a \"");
      const std::string after = trim(value.substr(closing + 1));
      if (!after.empty() && after.front() != '#')
        throw Error(where + "'" + printable(after) +
                    "' follows the quoted value: a line holds one value (a comment starts "
                    "with #)");
      value = value.substr(1, closing - 1);
    } else if (const auto hash = value.find('#'); hash != std::string::npos) {
      value = trim(value.substr(0, hash));
    }
    const std::string name = trim(line.substr(0, equals));
    const auto [earlier, first_time] = seen.try_emplace(name, line_number, value);
    if (!first_time)
      throw Error(where + printable(name) +
                  " is set twice, to '" + printable(earlier->second.second) + "' on line " +
                  std::to_string(earlier->second.first) + " and to '" + printable(value) +
                  "' here: keep one of the two lines");
    try {
      set_config_value(config, name, value);
    } catch (const Error& error) {
      throw Error(where + error.what());
    }
    keys_set.push_back(name);
  }
  return keys_set;
}

std::vector<const ConfigKey*> kept_keys_that_differ(const Config& a, const Config& b) {
  std::vector<const ConfigKey*> differ;
  for (const ConfigKey& key : config_keys())
    if (!may_change_on_resume(key) && get_config_value(a, key) != get_config_value(b, key))
      differ.push_back(&key);
  return differ;
}

void validate_config(const Config& config) {
  if (config.train_fraction <= 0)
    throw Error(
        "train_fraction is 0: no text would be left to train on; give a fraction above 0 "
        "(the seeds' is 0.9)");
  if (config.head_size == 0 && config.n_embd % config.n_head != 0)
    throw Error("n_embd (" + std::to_string(config.n_embd) + ") is not divisible by n_head (" +
                std::to_string(config.n_head) +
                "): choose an n_head that divides n_embd, or set head_size explicitly (seed 004 "
                "uses head_size=10 with n_embd=32 and n_head=3)");
  // The fused qkv matrix has 3 * n_head * head_size rows, counted in int by the model.
  const int64_t qkv_rows = 3 * static_cast<int64_t>(config.n_head) * config.effective_head_size();
  if (qkv_rows > std::numeric_limits<int>::max())
    throw Error("n_head (" + std::to_string(config.n_head) + ") times head_size (" +
                std::to_string(config.effective_head_size()) +
                ") is too large: the attention would need " + std::to_string(qkv_rows) +
                " qkv rows; choose fewer or smaller heads");
  if (config.init == "torch_default" && config.scaled_residual_init)
    throw Error(
        "scaled_residual_init scales the normal init's init_std, but init is "
        "torch_default: set init=normal or scaled_residual_init=false");
  if (config.lr_schedule == "cosine") {
    if (config.lr_decay_iters <= config.warmup_iters)
      throw Error("lr_decay_iters (" + std::to_string(config.lr_decay_iters) +
                  ") must be larger than warmup_iters (" + std::to_string(config.warmup_iters) +
                  ") for the cosine schedule");
    if (config.min_lr > config.learning_rate)
      throw Error("min_lr (" + shortest_double(config.min_lr) +
                  ") must not exceed learning_rate (" + shortest_double(config.learning_rate) +
                  "): lower --min_lr with it (nanoGPT takes a tenth), or --lr_schedule=constant");
  }
  if (config.out_dir.empty()) throw Error("out_dir is empty: name a folder for the checkpoint");
}

namespace {

// Whether `key` is read by `config`'s schedule: warmup_iters, lr_decay_iters and min_lr are
// read by the cosine schedule alone (optim/lr_schedule.cpp).
bool schedule_reads(const Config& config, std::string_view key) {
  return config.lr_schedule == "cosine" ||
         (key != "warmup_iters" && key != "lr_decay_iters" && key != "min_lr");
}

}  // namespace

void refuse_unused_schedule_keys(const Config& config, const std::vector<std::string>& given) {
  std::vector<std::string> unused;
  for (const ConfigKey& key : config_keys())
    if (!schedule_reads(config, key.name) &&
        std::find(given.begin(), given.end(), key.name) != given.end())
      unused.push_back(key.name);
  if (unused.empty()) return;
  const bool one = unused.size() == 1;
  std::string names;
  for (const std::string& name : unused) names += (names.empty() ? "" : ", ") + name;
  throw Error(names + (one ? " does" : " do") + " nothing with lr_schedule = " +
              config.lr_schedule + ": only the cosine schedule reads " + (one ? "it" : "them") +
              "; add --lr_schedule=cosine, or drop " + (one ? "it" : "them"));
}

nlohmann::json config_to_json(const Config& config) {
  nlohmann::json json = nlohmann::json::object();
  for (const ConfigKey& key : config_keys()) {
    std::visit([&](auto member) { json[key.name] = config.*member; }, key.member);
  }
  return json;
}

void apply_config_json(Config& config, const nlohmann::json& json, const std::string& origin) {
  if (!json.is_object()) throw Error(origin + ": the config is not a JSON object");
  for (const auto& [name, value] : json.items()) {
    std::string text;
    if (value.is_string()) text = value.get<std::string>();
    else if (value.is_boolean()) text = value.get<bool>() ? "true" : "false";
    else if (value.is_number_unsigned()) text = std::to_string(value.get<uint64_t>());
    else if (value.is_number_integer()) text = std::to_string(value.get<int64_t>());
    else if (value.is_number_float()) text = shortest_double(value.get<double>());
    else
      throw Error(origin + ": config key " + printable(name) + " has a value of the wrong type");
    try {
      set_config_value(config, name, text);
    } catch (const Error& error) {
      throw Error(origin + ": " + error.what());
    }
  }
}

std::string config_to_text(const Config& config) {
  std::ostringstream out;
  std::string group;
  for (const ConfigKey& key : config_keys()) {
    if (group != key.group) {
      group = key.group;
      out << "# " << group << "\n";
    }
    // A key the schedule ignores is shown as a comment, so that the text loads back as a config
    // file: given there, it would be refused (refuse_unused_schedule_keys).
    const bool unused = !schedule_reads(config, key.name);
    out << (unused ? "# " : "") << key.name << " = " << get_config_value(config, key)
        << (unused ? "  (read by lr_schedule = cosine only)" : "") << "\n";
  }
  return out.str();
}

}  // namespace folio
