// A training run's records as series to plot, read from RUN_DIR/metrics.jsonl.
#pragma once

#include <string>
#include <vector>

#include "plot/figure.h"

namespace folio {

struct RunMetrics {
  std::string label;                    // the run folder's name
  std::vector<Point> train_loss;        // (step, loss) of the training records
  std::vector<Point> tokens_per_second; // (step, tokens/s) of the training records
  std::vector<Point> eval_train_loss;   // (step, train_loss) of the evaluation records
  std::vector<Point> val_loss;          // (step, val_loss) of the evaluation records
};

// `run` is an out_dir of `folio train` (or its metrics.jsonl). A line cut short at the end (a
// run still writing, or killed) is skipped; any other line that is not a JSON record, a missing
// file or a file without records is a folio::Error naming the file.
RunMetrics read_run_metrics(const std::string& run);

}  // namespace folio
