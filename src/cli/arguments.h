// Command-line arguments: `--name=value`, `--name value`, bare `--flag`, and positionals.
// Each subcommand takes its own options out first; whatever `--key=value` remains is a config
// key (config/config_keys.cpp), and anything else is an error that suggests the nearest name.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"

namespace folio {

class Arguments {
 public:
  Arguments(int argc, char** argv, int first);

  // Removes and returns option `name`'s value, if given; given twice with different values
  // (`--config a --config b`) is a usage error naming both.
  std::optional<std::string> take(const std::string& name);
  // Removes a boolean flag: true when given bare or as --name=true.
  bool take_flag(const std::string& name);
  // The positional arguments, in order.
  const std::vector<std::string>& positionals() const { return positionals_; }
  // Applies every remaining option to `config` as a config key; an option that is neither a
  // config key nor in `command_options` gets an error naming the nearest known name.
  void apply_config_keys(Config& config, const std::vector<std::string>& command_options);
  // Errors if any option is left (for commands that take no config keys).
  void expect_empty(const std::vector<std::string>& command_options) const;
  // The arguments as given (after the program name), without option `name` and its value:
  // what `--nproc` hands to the ranks it starts.
  std::vector<std::string> original_without(const std::string& name) const;

 private:
  std::vector<std::string> original_;
  std::vector<std::pair<std::string, std::optional<std::string>>> options_;
  std::vector<std::string> positionals_;
};

// Parses an integer / a number option value, naming the option in the error.
int parse_int_option(const std::string& name, const std::string& value, long long min,
                     long long max);
double parse_double_option(const std::string& name, const std::string& value, double min,
                           double max);

}  // namespace folio
