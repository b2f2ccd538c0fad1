// folio plot RUN_DIR [RUN_DIR ...] [-o FILE.png|FILE.svg] [--width N] [--height N]: loss and
// training speed against step from each run's metrics.jsonl, the runs overlaid.
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#if defined(FOLIO_PLOT)
#include "plot/loss_figure.h"
#include "plot/render.h"
#endif

namespace folio {

namespace {

constexpr const char* kPlotHelp =
    "usage: folio plot RUN_DIR [RUN_DIR ...] [-o FILE.png|FILE.svg] [--width N] [--height N]\n\n"
    "Draws the training and validation loss against step, and the training speed in tokens/s,\n"
    "from each run's metrics.jsonl (RUN_DIR is the out_dir of `folio train`), several runs\n"
    "overlaid in different colours. -o picks the file and, by its extension, PNG or SVG;\n"
    "without it one run is drawn to RUN_DIR/loss.png, several to ./loss.png. The default size\n"
    "is 960 x 640 pixels.\n";

}  // namespace

int plot_command(Arguments& arguments) {
  if (arguments.take_flag("help")) {
    std::cout << kPlotHelp;
    return 0;
  }
  // The file to write, from --output, --o or -o: one of them, once (the last had silently won).
  std::optional<std::string> output;
  const auto take_output = [&](const std::string& given) {
    if (output && *output != given)
      arguments.problem("the output file is given twice (" + *output + " and " + given +
                        "): keep one");
    output = given;
  };
  if (auto o = arguments.take("output")) take_output(*o);
  if (auto o = arguments.take("o")) take_output(*o);
  int width = 960, height = 640;
  if (auto v = arguments.take_int("width", 200, 10000)) width = *v;
  if (auto v = arguments.take_int("height", 150, 10000)) height = *v;

  // The short form "-o FILE" arrives among the positionals (options start with "--").
  std::vector<std::string> runs;
  const std::vector<std::string>& positionals = arguments.positionals();
  for (size_t i = 0; i < positionals.size(); ++i) {
    if (positionals[i] != "-o") {
      runs.push_back(positionals[i]);
      continue;
    }
    if (i + 1 == positionals.size())
      arguments.problem("-o needs a file name (-o FILE.png)");
    else
      take_output(positionals[++i]);
  }
  if (runs.empty())
    arguments.problem("folio plot needs a RUN_DIR: the out_dir of a folio train run");
  arguments.finish("plot", {"output", "o", "width", "height", "help"},
                   /*positionals_allowed=*/true);
  // One run's figure goes into its folder (the one holding the metrics file it was named by).
  std::string path = "loss.png";
  if (output) {
    path = *output;
  } else if (runs.size() == 1) {
    const std::filesystem::path run(runs[0]);
    path = ((run.extension() == ".jsonl" ? run.parent_path() : run) / "loss.png").string();
  }
#if defined(FOLIO_PLOT)
  image_format_of(path);  // a bad extension is reported before any file is read

  std::vector<RunMetrics> metrics;
  for (const std::string& run : runs) metrics.push_back(read_run_metrics(run));
  write_figure(loss_figure(metrics, width, height), path);
  std::cout << "wrote " << path << "\n";
  return 0;
#else
  throw Error("this folio was built without cairo, so it cannot draw " + path +
              ": apt-get install libcairo2-dev pkg-config, then rebuild (cmake finds it)");
#endif
}

}  // namespace folio
