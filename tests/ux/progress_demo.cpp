// A stand-in training run that drives the progress displays as the trainer does, on a simulated
// clock, so that the terminal form can be tested under a real pseudo-terminal and watched by hand:
//
//   script -qc "build/tests/ux/folio_progress_demo --steps 400 --real_time" /dev/null
//   folio_progress_demo --steps 400 | cat        (the plain form)
//
// --quiet turns the progress off; --real_time sleeps through the simulated time.
#include <chrono>
#include <cmath>
#include <iostream>
#include <thread>

#include "cli/arguments.h"
#include "core/error.h"
#include "progress/progress.h"
#include "progress/task_progress.h"

namespace {

// Simulated time: each step advances it; with --real_time the demo also sleeps that long.
struct DemoClock {
  double now = 0;
  bool real_time = false;
  void pass(double seconds) {
    now += seconds;
    if (real_time) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }
};

int run_demo(folio::Arguments& arguments) {
  const int steps = folio::parse_int_option("steps", arguments.take("steps").value_or("200"), 1,
                                            1000000);
  const bool quiet = arguments.take_flag("quiet");
  DemoClock clock;
  clock.real_time = arguments.take_flag("real_time");
  arguments.finish("progress_demo", {"steps", "quiet", "real_time"});
  const folio::SecondsClock seconds = [&clock] { return clock.now; };

  {
    const double bytes = 40e6;
    folio::TaskProgress preparing("preparing demo.txt", bytes, "bytes",
                                  folio::StatusLine::standard_output(), !quiet, seconds);
    for (int chunk = 1; chunk <= 40; ++chunk) {
      clock.pass(0.1);
      preparing.set_done(chunk * bytes / 40);
    }
    preparing.finish();
  }

  folio::TrainingProgress progress({.total_steps = steps, .quiet = quiet},
                                   folio::StatusLine::standard_output(), seconds);
  const int eval_interval = std::max(steps / 4, 1);
  for (int step = 0; step < steps; ++step) {
    if (step % eval_interval == 0) {
      clock.pass(0.5);
      const double val = 2.0 + 2.2 * std::exp(-step / 100.0);
      progress.eval_done(step, val - 0.05, val);
      progress.line("step " + std::to_string(step) + ": val loss improved, saved demo.ckpt");
    }
    clock.pass(0.05);
    folio::StepReport report{.step = step + 1};
    if ((step + 1) % 10 == 0) {
      report.loss = 2.0 + 2.2 * std::exp(-(step + 1) / 100.0);
      report.learning_rate = 1e-3;
      report.ms_per_step = 50;
      report.tokens_per_second = 15360;
      report.mfu = 0.42;
    }
    progress.step_done(report);
  }
  progress.finish();
  std::cout << "trained " << steps << " steps\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    folio::Arguments arguments(argc, argv, 1);
    return run_demo(arguments);
  } catch (const folio::Error& error) {
    std::cerr << "folio_progress_demo: error: " << error.what() << "\n";
    return 2;
  }
}
