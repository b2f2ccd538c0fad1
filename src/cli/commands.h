// One function per subcommand; each returns the process exit code.
#pragma once

#include "cli/arguments.h"

namespace folio {

int train_command(Arguments& arguments);
int eval_command(Arguments& arguments);
int sample_command(Arguments& arguments);
int bench_command(Arguments& arguments);
int plot_command(Arguments& arguments);
int info_command(Arguments& arguments);
int tokenize_command(Arguments& arguments);
int tokenizer_command(Arguments& arguments);
int prepare_command(Arguments& arguments);
int import_command(Arguments& arguments);  // hf_commands.cpp
int export_command(Arguments& arguments);

// The config keys (name, type, default in `defaults`, scope, meaning) from the key table: grouped
// text for `folio train --help`, or the Markdown table the README holds
// (`folio train --help --markdown`; tests/ux/test_readme_keys.py keeps the two equal).
std::string config_keys_help(const Config& defaults = Config{});
std::string config_keys_markdown(const Config& defaults = Config{});

}  // namespace folio
