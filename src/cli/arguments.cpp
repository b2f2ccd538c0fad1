#include "cli/arguments.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace folio {

namespace {

bool looks_like_option(const std::string& text) {
  return text.size() > 2 && text[0] == '-' && text[1] == '-';
}

std::string nearest_name(const std::string& name, const std::vector<std::string>& options,
                         bool with_config_keys) {
  std::vector<std::string> candidates = options;
  if (with_config_keys)
    for (const ConfigKey& key : config_keys()) candidates.push_back(key.name);
  return nearest_word(name, candidates);
}

}  // namespace

Arguments::Arguments(int argc, char** argv, int first) {
  for (int i = 1; i < argc; ++i) original_.push_back(argv[i]);
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!looks_like_option(arg)) {
      positionals_.push_back(arg);
      continue;
    }
    const std::string body = arg.substr(2);
    const auto equals = body.find('=');
    if (equals != std::string::npos) {
      options_.emplace_back(body.substr(0, equals), body.substr(equals + 1));
    } else if (i + 1 < argc && !looks_like_option(argv[i + 1])) {
      options_.emplace_back(body, std::string(argv[++i]));
    } else {
      options_.emplace_back(body, std::nullopt);
    }
  }
}

std::optional<std::string> Arguments::take(const std::string& name) {
  std::optional<std::string> value;
  bool found = false;
  for (auto it = options_.begin(); it != options_.end();) {
    if (it->first == name) {
      if (!it->second) throw UsageError("--" + name + " needs a value (--" + name + "=VALUE)");
      if (found && *value != *it->second)
        throw UsageError("--" + name + " is given twice, as '" + *value + "' and as '" +
                         *it->second + "': give it once");
      value = it->second;
      found = true;
      it = options_.erase(it);
    } else {
      ++it;
    }
  }
  return found ? value : std::nullopt;
}

bool Arguments::take_flag(const std::string& name) {
  bool value = false;
  for (auto it = options_.begin(); it != options_.end();) {
    if (it->first == name) {
      value = !it->second || *it->second == "true" || *it->second == "1";
      if (it->second && !value && *it->second != "false" && *it->second != "0") {
        // "--quiet something": the word was a positional, not the flag's value.
        positionals_.push_back(*it->second);
        value = true;
      }
      it = options_.erase(it);
    } else {
      ++it;
    }
  }
  return value;
}

void Arguments::apply_config_keys(Config& config, const std::vector<std::string>& command_options) {
  for (const auto& [name, value] : options_) {
    if (find_config_key(name) == nullptr) {
      const std::string guess = nearest_name(name, command_options, true);
      throw UsageError("unknown option --" + name +
                       (guess.empty() ? "" : " (did you mean --" + guess + "?)") +
                       "; `folio train --help` lists every config key");
    }
    if (!value) throw UsageError("--" + name + " needs a value (--" + name + "=VALUE)");
    set_config_value(config, name, *value);
  }
  options_.clear();
}

void Arguments::expect_empty(const std::vector<std::string>& command_options) const {
  if (options_.empty()) return;
  const std::string& name = options_.front().first;
  const std::string guess = nearest_name(name, command_options, false);
  throw UsageError("unknown option --" + name +
                   (guess.empty() ? "" : " (did you mean --" + guess + "?)"));
}

std::vector<std::string> Arguments::original_without(const std::string& name) const {
  std::vector<std::string> kept;
  for (size_t i = 0; i < original_.size(); ++i) {
    const std::string& arg = original_[i];
    if (arg == "--" + name) {
      if (i + 1 < original_.size() && !looks_like_option(original_[i + 1])) ++i;  // its value
      continue;
    }
    if (arg.rfind("--" + name + "=", 0) == 0) continue;
    kept.push_back(arg);
  }
  return kept;
}

int parse_int_option(const std::string& name, const std::string& value, long long min,
                     long long max) {
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE)
    throw UsageError("--" + name + ": '" + value + "' is not an integer");
  if (parsed < min || parsed > max)
    throw UsageError("--" + name + ": " + value + " is out of range [" + std::to_string(min) +
                     ", " + std::to_string(max) + "]");
  return static_cast<int>(parsed);
}

double parse_double_option(const std::string& name, const std::string& value, double min,
                           double max) {
  errno = 0;
  char* end = nullptr;
  const double parsed = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(parsed))
    throw UsageError("--" + name + ": '" + value + "' is not a number");
  if (parsed < min || parsed > max)
    throw UsageError("--" + name + ": " + value + " is out of range [" + std::to_string(min) +
                     ", " + std::to_string(max) + "]");
  return parsed;
}

}  // namespace folio
