// The folio command: picks the subcommand and hands over; every user error arrives here as one
// folio::Error and is printed once, one `folio: error:` line per problem.
//
// Exit codes, the same for every subcommand: 0 success (and --help, --version); 1 a failure
// while running (a missing or damaged file, a refused out_dir, a training failure); 2 a usage
// error (an unknown command or option, a bad value, a missing or stray argument); 130 (143 for
// SIGTERM) a run stopped at once by a second Ctrl-C.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>

#include "cli/arguments.h"
#include "cli/build_info.h"
#include "cli/commands.h"
#include "cli/thread_budget.h"
#include "core/error.h"
#include "core/signal_thread.h"

namespace {

constexpr const char* kUsage =
    "usage: folio <command> [options]\n\n"
    "commands:\n"
    "  train    train a GPT on a text file (folio train --help lists every config key)\n"
    "  eval     exact train/val loss of a checkpoint, as one JSON line\n"
    "  sample   generate text from a checkpoint\n"
    "  bench    time training steps, as one JSON line\n"
    "  plot     draw the loss curves of one or more runs (PNG or SVG)\n"
    "  info     describe a checkpoint: config, parameters, step, losses, checksums\n"
    "  tokenize text to GPT-2 (byte-level BPE) token ids, or back with --decode\n"
    "  tokenizer train a byte-level BPE tokenizer on your text (folio tokenizer train)\n"
    "  prepare  tokenise a text once into train/val token files (nanoGPT's and llm.c's)\n"
    "  import   a Hugging Face GPT-2 folder as a folio checkpoint (folio import --hf DIR)\n"
    "  export   a folio checkpoint as a Hugging Face GPT-2 folder (folio export --hf DIR)\n\n"
    "`folio <command> --help` (or -h, or `folio help <command>`) describes each;\n"
    "`folio --version` prints the version and what this build includes.\n"
    "Exit codes: 0 done, 1 a failure while running, 2 a usage error.\n";

int run_command(const std::string& command, folio::Arguments& arguments) {
  if (command == "train") return folio::train_command(arguments);
  if (command == "eval") return folio::eval_command(arguments);
  if (command == "sample") return folio::sample_command(arguments);
  if (command == "bench") return folio::bench_command(arguments);
  if (command == "plot") return folio::plot_command(arguments);
  if (command == "info") return folio::info_command(arguments);
  if (command == "tokenize") return folio::tokenize_command(arguments);
  if (command == "tokenizer") return folio::tokenizer_command(arguments);
  if (command == "prepare") return folio::prepare_command(arguments);
  if (command == "import") return folio::import_command(arguments);
  if (command == "export") return folio::export_command(arguments);
  throw folio::UsageError("unknown command '" + command +
                          "': use train, eval, sample, bench, plot, info, tokenize, tokenizer, "
                          "prepare, import or export (`folio --help`)");
}

// Each line of the message is one problem.
void print_error(const char* message) {
  std::istringstream lines(message);
  std::string line;
  while (std::getline(lines, line)) std::fprintf(stderr, "folio: error: %s\n", line.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string first = argc < 2 ? "" : argv[1];
  try {
    if (first.empty() || first == "--help" || first == "-h" ||
        (first == "help" && (argc == 2 || std::strcmp(argv[2], "help") == 0))) {
      std::cout << kUsage;
      if (first.empty()) throw folio::UsageError("no command given: name one of those above");
      folio::check_standard_output_written();
      return 0;
    }
    if (first == "--version" || first == "version") {
      std::cout << folio::build_info();
      folio::check_standard_output_written();
      return 0;
    }
    folio::prepare_threads_before_parallel_work(argv);
    folio::receive_stop_signals_on_their_own_thread();  // why: core/signal_thread.h
    if (first == "help") {  // folio help CMD: as folio CMD --help
      const bool tokenizer_action = argc == 4 && std::strcmp(argv[2], "tokenizer") == 0 &&
                                    std::strcmp(argv[3], "train") == 0;  // its one action
      if (argc > 3 && !tokenizer_action)
        throw folio::UsageError(std::string("folio help takes one command; '") + argv[3] +
                                "' is another");
      char help_flag[] = "--help";
      char* help_argv[] = {argv[0], argv[2], help_flag};
      folio::Arguments arguments(3, help_argv, 2);
      const int code = run_command(argv[2], arguments);
      if (code == 0) folio::check_standard_output_written();
      return code;
    }
    folio::Arguments arguments(argc, argv, 2);
    const int code = run_command(first, arguments);
    if (code == 0) folio::check_standard_output_written();
    return code;
  } catch (const folio::UsageError& error) {
    print_error(error.what());
    return 2;
  } catch (const folio::Error& error) {
    print_error(error.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "folio: error: out of memory: use a smaller batch_size or model\n");
    return 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "folio: error: unexpected failure: %s\n", error.what());
    return 1;
  }
}
