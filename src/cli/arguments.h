// Command-line arguments: `--name=value`, `--name value`, bare `--flag`, and positionals.
// Each subcommand takes its own options out first; whatever `--key=value` remains is a config
// key (config/config_keys.cpp), and anything else is an error that suggests the nearest name.
//
// Problems that do not depend on one another (a bad value here, an unknown option there, a
// stray word) are collected rather than thrown one at a time, so that one run of the command
// names them all: `finish()` throws them together, one `folio: error:` line each.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/error.h"

namespace folio {

class Arguments {
 public:
  Arguments(int argc, char** argv, int first);

  // Removes and returns option `name`'s value, if given; given twice with different values
  // (`--config a --config b`) is a usage error naming both.
  std::optional<std::string> take(const std::string& name);
  // Removes a boolean flag: true when given bare or with a true value (true/1/yes/on), false
  // with a false one (false/0/no/off). `--quiet WORD` leaves WORD a positional; `--quiet=WORD`
  // with any other WORD is a problem. take_flag("help") is also true for a bare `-h`.
  bool take_flag(const std::string& name);
  // Whether option `name` was given (before it is taken).
  bool has(const std::string& name) const;
  // Removes and parses an integer / a number option; a bad value is recorded as a problem.
  std::optional<long long> take_int(const std::string& name, long long min, long long max);
  std::optional<double> take_double(const std::string& name, double min, double max);
  // The positional arguments, in order.
  const std::vector<std::string>& positionals() const { return positionals_; }
  // Applies every remaining option to `config` as a config key and returns their names; an
  // option that is neither a config key nor in `command_options` is a problem naming the nearest
  // known name and `folio COMMAND --help`, and so is a key given twice with different values
  // (the last would silently win).
  std::vector<std::string> apply_config_keys(Config& config,
                                             const std::vector<std::string>& command_options,
                                             const std::string& command);

  // Records one problem of the command line (thrown later by finish()).
  void problem(const std::string& message) { problems_.push_back(message); }
  // Runs `check`, recording a folio::Error it throws as a problem instead of stopping.
  template <typename Check>
  void collect(Check&& check) {
    try {
      check();
    } catch (const Error& error) {
      problems_.push_back(error.what());
    }
  }
  // Ends parsing: any option still left (unknown to `command_options`) and, unless
  // `positionals_allowed`, any positional argument are problems too; throws every problem
  // recorded so far as one UsageError (one line each). `positional_hint` ends the message about
  // a stray positional (e.g. "pass the prompt as --prompt 'TEXT'").
  void finish(const std::string& command, const std::vector<std::string>& command_options,
              bool positionals_allowed = false, const std::string& positional_hint = "");
  // Throws the problems recorded so far, if any (as finish() does, without its checks).
  void throw_problems() const;

  // The arguments as given (after the program name), without option `name` and its value:
  // what `--nproc` hands to the ranks it starts.
  std::vector<std::string> original_without(const std::string& name) const;

 private:
  struct Option {
    std::string name;
    std::optional<std::string> value;
    bool attached = false;  // --name=value (not --name value)
  };
  std::vector<std::string> original_;
  std::vector<Option> options_;
  std::vector<std::string> positionals_;
  std::vector<std::string> problems_;
};

// Parses an integer / a number option value, naming the option in the error; a number must lie
// in [min, max], or (min, max] when `min_exclusive`.
int parse_int_option(const std::string& name, const std::string& value, long long min,
                     long long max);
double parse_double_option(const std::string& name, const std::string& value, double min,
                           double max, bool min_exclusive = false);
// The --threads option of the commands that are not training (tokenize, tokenizer train,
// prepare): a count, or 0 or absent for all cores, as the threads key takes it.
int parse_threads_option(const std::optional<std::string>& value);
// Whether the config key train_fraction is among those `given` on the command line (from
// apply_config_keys). It splits a text; a folder of token files (`data`) was split into train
// and val when prepared, so there the key would do nothing: a UsageError (train, eval).
bool train_fraction_given(const std::vector<std::string>& given, const std::string& data);
// Throws folio::Error when what a command wrote to stdout did not all get there (a full disk,
// /dev/full, a closed pipe whose SIGPIPE is ignored): `folio sample > out.txt` on a full disk had
// exited 0 with the text cut short.
void check_standard_output_written();

// A boolean's value as the config keys take it: true/1/yes/on or false/0/no/off (any case).
std::optional<bool> parse_bool_word(const std::string& value);
// Those words, as error messages name them.
inline constexpr const char* kBooleanWords = "true or false (also 1/0, yes/no, on/off)";

}  // namespace folio
