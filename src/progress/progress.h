// Live progress of a training run, shown by one process (rank 0) only.
//
// On a terminal one status line is redrawn in place, at most ten times a second:
//
//    500/2000 █████████░░░░░░░░░░░░░░░░░░░  25% | loss 2.1523 | val 2.3085 | 13.9 ms/step |
//             55.3k tok/s | MFU 9.1% | ETA 0:21                        (one line on screen)
//
// and lines printed through line() or eval_done() appear above it, whole. Elsewhere (a log
// file, a pipe, CI) nothing is redrawn; plain lines are printed instead,
//
//   iter 500/2000: loss 2.1523, lr 8.94e-04, 13.9 ms/step, 55324 tokens/s, MFU 9.1%, ETA 0:21
//
// for the first step whose loss was measured, then for the first measured step after at least
// plain_line_seconds (10 s) have passed since the previous line, and for the last step: enough to
// follow a run in a CI log without a line per step (metrics.jsonl keeps every log_interval step).
//
// `quiet` turns both forms off; evaluation results and line() still print. A process that is
// not the printer (ranks other than 0) prints nothing at all.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "progress/progress_clock.h"
#include "progress/status_line.h"

namespace folio {

inline constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

// One finished optimizer step. Values not measured at this step stay kNotMeasured: the display
// keeps showing the last measured loss (measuring it costs a device sync, so the trainer does
// it every log_interval steps, not every step).
struct StepReport {
  int64_t step = 0;  // optimizer steps done so far, 1 .. total_steps
  double loss = kNotMeasured;
  double learning_rate = kNotMeasured;
  double ms_per_step = kNotMeasured;  // recent average, evaluation time left out
  double tokens_per_second = kNotMeasured;
  double mfu = kNotMeasured;  // model FLOPs utilisation in [0, 1] (train/mfu.h)
};

struct ProgressSettings {
  int64_t total_steps = 0;
  int64_t first_step = 0;  // a resumed run starts here; the ETA counts only this run's speed
  bool quiet = false;      // neither the status line nor plain progress lines
  bool is_printer = true;  // false on every rank but 0: print nothing
  double redraw_seconds = 0.1;
  double plain_line_seconds = 10;
};

class TrainingProgress {
 public:
  TrainingProgress(const ProgressSettings& settings, StatusLine output,
                   SecondsClock clock = steady_seconds);
  // A run that ends by an exception leaves its last status on screen, above the error message.
  ~TrainingProgress();
  TrainingProgress(const TrainingProgress&) = delete;
  TrainingProgress& operator=(const TrainingProgress&) = delete;

  void step_done(const StepReport& report);
  // Prints the seed's "step N: train loss X, val loss Y" and shows val on the status line.
  void eval_done(int64_t step, double train_loss, double val_loss);
  // Prints a whole line (or several) above the status line.
  void line(const std::string& text);
  // Erases the status line before other code writes to the same stream itself (a sample
  // streamed character by character); the next step_done draws it again.
  void clear();
  // The last status stays on screen (terminal) or is printed (plain) if it was not yet.
  void finish();

 private:
  bool shows_progress() const { return settings_.is_printer && !settings_.quiet; }
  double eta_seconds(double now) const;
  std::string stale_figures_note() const;
  std::string status_text(double now, bool name_stale_figures = false) const;
  std::string plain_text(double now) const;
  void print_plain(double now);

  ProgressSettings settings_;
  StatusLine output_;
  SecondsClock clock_;
  double start_seconds_;
  StepReport last_;  // the latest report, the last measured values carried forward
  int64_t measured_step_ = -1;  // the step whose loss (and speed) last_ shows
  double last_val_loss_ = kNotMeasured;
  double last_draw_seconds_ = -std::numeric_limits<double>::infinity();
  double last_plain_seconds_ = -std::numeric_limits<double>::infinity();
  int64_t last_plain_step_ = -1;
  bool finished_ = false;
};

}  // namespace folio
