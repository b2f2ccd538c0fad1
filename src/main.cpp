// The folio command: picks the subcommand and hands over; every user error arrives here as one
// folio::Error and is printed once.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "core/error.h"

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
    "  prepare  tokenise a text once into train/val token files (nanoGPT's and llm.c's)\n\n"
    "`folio <command> --help` describes each.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help") ||
      !std::strcmp(argv[1], "-h")) {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  try {
    folio::Arguments arguments(argc, argv, 2);
    if (command == "train") return folio::train_command(arguments);
    if (command == "eval") return folio::eval_command(arguments);
    if (command == "sample") return folio::sample_command(arguments);
    if (command == "bench") return folio::bench_command(arguments);
    if (command == "plot") return folio::plot_command(arguments);
    if (command == "info") return folio::info_command(arguments);
    if (command == "tokenize") return folio::tokenize_command(arguments);
    if (command == "tokenizer") return folio::tokenizer_command(arguments);
    if (command == "prepare") return folio::prepare_command(arguments);
    throw folio::UsageError("unknown command '" + command +
                            "': use train, eval, sample, bench, plot, info, tokenize, tokenizer or prepare");
  } catch (const folio::UsageError& error) {
    std::fprintf(stderr, "folio: error: %s\n", error.what());
    return 2;
  } catch (const folio::Error& error) {
    std::fprintf(stderr, "folio: error: %s\n", error.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "folio: error: out of memory: use a smaller batch_size or model\n");
    return 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "folio: error: unexpected failure: %s\n", error.what());
    return 1;
  }
}
