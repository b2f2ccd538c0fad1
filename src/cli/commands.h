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

// The config keys as a help table (name, type, default, meaning), grouped.
std::string config_keys_help();

}  // namespace folio
