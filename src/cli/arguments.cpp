#include "cli/arguments.h"

#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "core/text_format.h"

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

std::string unknown_option(const std::string& name, const std::string& guess) {
  return "unknown option --" + name + (guess.empty() ? "" : " (did you mean --" + guess + "?)");
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
      options_.push_back({body.substr(0, equals), body.substr(equals + 1), true});
    } else if (i + 1 < argc && !looks_like_option(argv[i + 1])) {
      options_.push_back({body, std::string(argv[++i]), false});
    } else {
      options_.push_back({body, std::nullopt, false});
    }
  }
}

std::optional<std::string> Arguments::take(const std::string& name) {
  std::optional<std::string> value;
  bool found = false, missing = false;
  for (auto it = options_.begin(); it != options_.end();) {
    if (it->name == name) {
      if (!it->value) {
        missing = true;
      } else if (value && *value != *it->value) {
        problem("--" + name + " is given twice, as '" + *value + "' and as '" + *it->value +
                "': give it once");
      } else {
        value = it->value;
      }
      found = true;
      it = options_.erase(it);
    } else {
      ++it;
    }
  }
  if (missing) problem("--" + name + " needs a value (--" + name + "=VALUE)");
  return found ? value : std::nullopt;
}

bool Arguments::take_flag(const std::string& name) {
  bool value = false;
  if (name == "help") {
    const auto dash_h = std::find(positionals_.begin(), positionals_.end(), "-h");
    if (dash_h != positionals_.end()) {
      positionals_.erase(dash_h);
      value = true;
    }
  }
  std::optional<bool> given;  // by an option (the last would silently win over an unlike one)
  const auto give = [&](bool word) {
    if (given && *given != word)
      problem("--" + name + " is given twice, as " + (*given ? "true" : "false") + " and as " +
              (word ? "true" : "false") + ": give it once");
    given = word;
    value = word;
  };
  for (auto it = options_.begin(); it != options_.end();) {
    if (it->name != name) {
      ++it;
      continue;
    }
    const std::optional<bool> word = it->value ? parse_bool_word(*it->value) : true;
    if (word) {
      give(*word);
    } else if (!it->attached) {
      // "--quiet something": the word was a positional, not the flag's value.
      positionals_.push_back(*it->value);
      give(true);
    } else {
      problem("--" + name + "='" + *it->value + "': --" + name + " takes " + kBooleanWords +
              ", or nothing");
    }
    it = options_.erase(it);
  }
  return value;
}

bool Arguments::has(const std::string& name) const {
  for (const Option& option : options_)
    if (option.name == name) return true;
  return false;
}

std::optional<long long> Arguments::take_int(const std::string& name, long long min,
                                             long long max) {
  const std::optional<std::string> text = take(name);
  if (!text) return std::nullopt;
  std::optional<long long> value;
  collect([&] { value = parse_int_option(name, *text, min, max); });
  return value;
}

std::optional<double> Arguments::take_double(const std::string& name, double min, double max) {
  const std::optional<std::string> text = take(name);
  if (!text) return std::nullopt;
  std::optional<double> value;
  collect([&] { value = parse_double_option(name, *text, min, max); });
  return value;
}

std::vector<std::string> Arguments::apply_config_keys(
    Config& config, const std::vector<std::string>& command_options, const std::string& command) {
  const std::string help = command == "train" ? "`folio train --help` lists every config key"
                                              : "`folio " + command + " --help` lists its options";
  std::vector<std::string> given;
  std::vector<const Option*> applied;
  for (Option& option : options_) {
    const ConfigKey* key = find_config_key(option.name);
    if (key == nullptr) {
      problem(unknown_option(option.name, nearest_name(option.name, command_options, true)) + "; " +
              help);
      continue;
    }
    // A boolean key given bare is true, as a bare flag is (`--tie_weights`).
    if (!option.value && std::holds_alternative<bool Config::*>(key->member)) option.value = "true";
    if (!option.value) {
      problem("--" + option.name + " needs a value (--" + option.name + "=VALUE)");
      continue;
    }
    const auto same_key = [&](const Option* earlier) { return earlier->name == option.name; };
    if (const auto earlier = std::find_if(applied.begin(), applied.end(), same_key);
        earlier != applied.end()) {
      if ((*earlier)->value != option.value)
        problem("--" + option.name + " is given twice (" + *(*earlier)->value + " and " +
                *option.value + "): give it once");
      continue;
    }
    applied.push_back(&option);
    given.push_back(option.name);
    collect([&] { set_config_value(config, option.name, *option.value); });
  }
  options_.clear();
  return given;
}

void Arguments::finish(const std::string& command, const std::vector<std::string>& command_options,
                       bool positionals_allowed, const std::string& positional_hint) {
  for (const Option& option : options_)
    problem(unknown_option(option.name, nearest_name(option.name, command_options, false)) +
            "; `folio " + command + " --help` lists its options");
  options_.clear();
  if (!positionals_allowed && !positionals_.empty()) {
    std::string message = "unexpected argument '" + positionals_.front() + "': folio " + command +
                          " takes no positional arguments";
    if (!positional_hint.empty()) message += "; " + positional_hint;
    problem(message);
  }
  throw_problems();
}

void Arguments::throw_problems() const {
  if (problems_.empty()) return;
  std::string all;
  for (const std::string& message : problems_) all += (all.empty() ? "" : "\n") + message;
  throw UsageError(all);
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
                           double max, bool min_exclusive) {
  errno = 0;
  char* end = nullptr;
  const double parsed = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(parsed))
    throw UsageError("--" + name + ": '" + value + "' is not a number");
  if (parsed < min || (min_exclusive && parsed == min) || parsed > max)
    throw UsageError("--" + name + ": " + value + " is out of range " +
                     (min_exclusive ? "(" : "[") + shortest_double(min) + ", " +
                     shortest_double(max) + "]");
  return parsed;
}

int parse_threads_option(const std::optional<std::string>& value) {
  const int threads = value ? parse_int_option("threads", *value, 0, 1024) : 0;
  return threads > 0 ? threads : omp_get_max_threads();
}

std::optional<bool> parse_bool_word(const std::string& value) {
  std::string lower = value;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "true" || lower == "1" || lower == "yes" || lower == "on") return true;
  if (lower == "false" || lower == "0" || lower == "no" || lower == "off") return false;
  return std::nullopt;
}

bool train_fraction_given(const std::vector<std::string>& given, const std::string& data) {
  if (std::find(given.begin(), given.end(), "train_fraction") == given.end()) return false;
  std::error_code error;
  if (std::filesystem::is_directory(data, error))
    throw UsageError("--train_fraction does nothing for " + data +
                     ", a folder of token files split into train and val when prepared: drop it");
  return true;
}

void check_standard_output_written() {
  std::cout.flush();
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout) && std::cout.good()) return;
  const int error = errno;
  throw Error(std::string("cannot write to standard output") +
              (error != 0 ? std::string(" (") + std::strerror(error) + ")" : "") +
              ", so what it holds is incomplete: free space where it goes, or send it elsewhere");
}

}  // namespace folio
