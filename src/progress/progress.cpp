#include "progress/progress.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "core/text_format.h"
#include "progress/progress_format.h"

namespace folio {

namespace {

void carry_forward(double& kept, double fresh) {
  if (std::isfinite(fresh)) kept = fresh;
}

std::string scientific(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.2e", value);
  return buffer;
}

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : separator) + part;
  return text;
}

}  // namespace

TrainingProgress::TrainingProgress(const ProgressSettings& settings, StatusLine output,
                                   SecondsClock clock)
    : settings_(settings),
      output_(std::move(output)),
      clock_(std::move(clock)),
      start_seconds_(clock_()) {}

TrainingProgress::~TrainingProgress() { output_.keep(); }

void TrainingProgress::step_done(const StepReport& report) {
  last_.step = report.step;
  if (std::isfinite(report.loss)) measured_step_ = report.step;
  carry_forward(last_.loss, report.loss);
  carry_forward(last_.learning_rate, report.learning_rate);
  carry_forward(last_.ms_per_step, report.ms_per_step);
  carry_forward(last_.tokens_per_second, report.tokens_per_second);
  carry_forward(last_.mfu, report.mfu);
  if (!shows_progress()) return;

  const double now = clock_();
  const bool last_step = report.step >= settings_.total_steps;
  if (output_.is_terminal()) {
    if (last_step || now - last_draw_seconds_ >= settings_.redraw_seconds) {
      output_.show(status_text(now));
      last_draw_seconds_ = now;
    }
    return;
  }
  // Plain lines only at steps whose loss was measured, so that every number in them is fresh.
  const bool plain_line_due = last_plain_step_ < 0 || last_step ||
                              now - last_plain_seconds_ >= settings_.plain_line_seconds;
  if (std::isfinite(report.loss) && plain_line_due) print_plain(now);
}

void TrainingProgress::eval_done(int64_t step, double train_loss, double val_loss) {
  last_val_loss_ = val_loss;
  if (shows_progress() && output_.showing()) output_.show(status_text(clock_()));
  line("step " + std::to_string(step) + ": train loss " + fixed(train_loss, 4) + ", val loss " +
       fixed(val_loss, 4));
}

void TrainingProgress::line(const std::string& text) {
  if (settings_.is_printer) output_.print(text);
}

void TrainingProgress::clear() {
  output_.clear();
  last_draw_seconds_ = -std::numeric_limits<double>::infinity();
}

void TrainingProgress::finish() {
  if (finished_) return;
  finished_ = true;
  if (!shows_progress() || last_.step <= settings_.first_step) return;
  const double now = clock_();
  if (output_.is_terminal()) {
    output_.show(status_text(now, /*name_stale_figures=*/true));
    output_.keep();
  } else if (last_plain_step_ != last_.step) {
    print_plain(now);
  }
}

double TrainingProgress::eta_seconds(double now) const {
  const int64_t steps_this_run = last_.step - settings_.first_step;
  if (steps_this_run <= 0) return kNotMeasured;
  return (now - start_seconds_) / static_cast<double>(steps_this_run) *
         static_cast<double>(settings_.total_steps - last_.step);
}

// The step whose figures (loss, speed) are shown, when it is not the latest step: after a
// stop or at a last step that was not a log_interval step, the figures are older than the step.
std::string TrainingProgress::stale_figures_note() const {
  if (measured_step_ < 0 || measured_step_ == last_.step) return "";
  return " (step " + std::to_string(measured_step_) + ")";
}

std::string TrainingProgress::status_text(double now, bool name_stale_figures) const {
  const std::string total = std::to_string(settings_.total_steps);
  std::string step = std::to_string(last_.step);
  step.insert(0, total.size() > step.size() ? total.size() - step.size() : 0, ' ');
  const double fraction =
      settings_.total_steps > 0
          ? static_cast<double>(last_.step) / static_cast<double>(settings_.total_steps)
          : 0.0;

  // Importance decides what stays on a narrow terminal: loss, then the time left, then val.
  std::vector<StatusField> fields;
  if (std::isfinite(last_.loss))
    fields.push_back(
        {"loss " + fixed(last_.loss, 4) + (name_stale_figures ? stale_figures_note() : ""), 6});
  if (std::isfinite(last_val_loss_)) fields.push_back({"val " + fixed(last_val_loss_, 4), 4});
  if (std::isfinite(last_.ms_per_step))
    fields.push_back({fixed(last_.ms_per_step, 1) + " ms/step", 2});
  if (std::isfinite(last_.tokens_per_second))
    fields.push_back({format_count(last_.tokens_per_second) + " tok/s", 3});
  if (std::isfinite(last_.mfu)) fields.push_back({"MFU " + fixed(100 * last_.mfu, 1) + "%", 1});
  if (last_.step >= settings_.total_steps)
    fields.push_back({"done in " + format_duration(now - start_seconds_), 5});
  else
    fields.push_back({"ETA " + format_duration(eta_seconds(now)), 5});
  return fit_status_line(step + "/" + total, fraction, std::move(fields), output_.columns(),
                         output_.unicode());
}

std::string TrainingProgress::plain_text(double now) const {
  std::vector<std::string> parts;
  if (std::isfinite(last_.loss)) parts.push_back("loss " + fixed(last_.loss, 4));
  if (std::isfinite(last_.learning_rate)) parts.push_back("lr " + scientific(last_.learning_rate));
  if (std::isfinite(last_.ms_per_step)) parts.push_back(fixed(last_.ms_per_step, 1) + " ms/step");
  if (std::isfinite(last_.tokens_per_second))
    parts.push_back(fixed(last_.tokens_per_second, 0) + " tokens/s");
  if (std::isfinite(last_.mfu)) parts.push_back("MFU " + fixed(100 * last_.mfu, 1) + "%");
  if (last_.step >= settings_.total_steps)
    parts.push_back("done in " + format_duration(now - start_seconds_));
  else
    parts.push_back("ETA " + format_duration(eta_seconds(now)));
  // Plain lines are printed at measured steps; only the last one (finish()) may be later.
  const std::string figures_of =
      stale_figures_note().empty()
          ? ""
          : " (loss and speed of step " + std::to_string(measured_step_) + ")";
  return "iter " + std::to_string(last_.step) + "/" + std::to_string(settings_.total_steps) +
         figures_of + ": " + join(parts, ", ");
}

void TrainingProgress::print_plain(double now) {
  output_.print(plain_text(now));
  last_plain_seconds_ = now;
  last_plain_step_ = last_.step;
}

}  // namespace folio
