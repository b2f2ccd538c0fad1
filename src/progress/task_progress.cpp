#include "progress/task_progress.h"

#include <cstdio>
#include <limits>
#include <vector>

#include "progress/progress_format.h"

namespace folio {

TaskProgress::TaskProgress(std::string name, double total, std::string unit, StatusLine output,
                           bool enabled, SecondsClock clock)
    : name_(std::move(name)),
      unit_(std::move(unit)),
      total_(total),
      output_(std::move(output)),
      enabled_(enabled),
      clock_(std::move(clock)),
      start_seconds_(clock_()),
      last_output_seconds_(-std::numeric_limits<double>::infinity()) {}

// Unfinished (an exception is on its way): only erase the status line, so that the error
// message starts on a clean line; no "done" line for work that was not done.
TaskProgress::~TaskProgress() {
  if (!finished_) output_.clear();
}

void TaskProgress::set_done(double done) {
  done_ = done;
  if (!enabled_ || finished_) return;
  const double now = clock_(), running = now - start_seconds_;
  const double since_output = now - last_output_seconds_;
  if (output_.is_terminal()) {
    if (running < kTerminalAppearSeconds || since_output < kRedrawSeconds) return;
    show_status(now);
  } else {
    if (running < kFirstPlainLineSeconds || since_output < kPlainLineSeconds) return;
    print_plain_line(now);
  }
  last_output_seconds_ = now;
  shown_anything_ = true;
}

void TaskProgress::show_status(double now) {
  std::vector<StatusField> fields;
  if (!unit_.empty()) fields.push_back({amount_text(), 2});
  if (total_ > 0) fields.push_back({"ETA " + eta_text(now), 1});
  output_.show(fit_status_line(name_, fraction(), fields, output_.columns(), output_.unicode()));
}

void TaskProgress::print_plain_line(double now) {
  std::string line = name_ + ": ";
  if (total_ > 0) {
    char percent[16];
    std::snprintf(percent, sizeof(percent), "%d%%", static_cast<int>(100 * fraction()));
    line += std::string(percent) + (unit_.empty() ? "" : " (" + amount_text() + ")") + ", ETA " +
            eta_text(now);
  } else {
    line += amount_text();
  }
  output_.print(line);
}

void TaskProgress::finish() {
  if (finished_) return;
  finished_ = true;
  if (!enabled_ || !shown_anything_) return;
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f s", clock_() - start_seconds_);
  output_.clear();
  output_.print(name_ + ": " + (unit_.empty() ? "done" : format_count(done_) + " " + unit_) +
                " in " + seconds);
}

std::string TaskProgress::amount_text() const {
  if (total_ <= 0) return format_count(done_) + " " + unit_;
  return format_count(done_) + "/" + format_count(total_) + " " + unit_;
}

std::string TaskProgress::eta_text(double now) const {
  if (done_ <= 0) return format_duration(-1);
  return format_duration((now - start_seconds_) / done_ * (total_ - done_));
}

}  // namespace folio
