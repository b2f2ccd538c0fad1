// Progress of long work that is not training: preparing a large data file, evaluating a whole
// split. Quick work shows nothing. On a terminal a status line appears once the task has run for
// half a second and is redrawn at most ten times a second:
//
//   preparing input.txt ███████████████░░░░░░░░░░░░░░░  52% | 26.1M/50.0M bytes | ETA 0:03
//
// elsewhere a plain line appears after 2 seconds and then at most one every 10 seconds:
//
//   preparing input.txt: 52% (26.1M/50.0M bytes), ETA 0:03
//
// When anything was shown, finishing prints one line saying so:
//
//   preparing input.txt: 50.0M bytes in 4.1 s
//
// Work measured in no natural unit (several passes over a file) can count a fraction of 1 with
// an empty unit: the amounts are then left out ("preparing input.txt: done in 4.1 s").
#pragma once

#include <string>

#include "progress/progress_clock.h"
#include "progress/status_line.h"

namespace folio {

class TaskProgress {
 public:
  static constexpr double kTerminalAppearSeconds = 0.5;
  static constexpr double kRedrawSeconds = 0.1;
  static constexpr double kFirstPlainLineSeconds = 2;
  static constexpr double kPlainLineSeconds = 10;

  // `total` is counted in `unit`s ("bytes", "windows"; "" shows no amounts); 0 when unknown
  // (no bar, no ETA).
  // `enabled` false (--quiet, or a rank other than 0) shows nothing at all.
  TaskProgress(std::string name, double total, std::string unit, StatusLine output,
               bool enabled = true, SecondsClock clock = steady_seconds);
  // Without finish() (an exception on its way) only erases the status line.
  ~TaskProgress();
  TaskProgress(const TaskProgress&) = delete;
  TaskProgress& operator=(const TaskProgress&) = delete;

  void advance(double amount = 1) { set_done(done_ + amount); }
  void set_done(double done);
  void finish();

 private:
  double fraction() const { return total_ > 0 ? done_ / total_ : -1; }
  void show_status(double now);
  void print_plain_line(double now);
  std::string amount_text() const;
  std::string eta_text(double now) const;

  std::string name_, unit_;
  double total_, done_ = 0;
  StatusLine output_;
  bool enabled_;
  SecondsClock clock_;
  double start_seconds_;
  double last_output_seconds_;
  bool shown_anything_ = false;
  bool finished_ = false;
};

}  // namespace folio
