// The progress displays rendered into strings: the terminal form (redrawn in place) and the
// plain form (whole lines), with a clock the test moves by hand.
#include <gtest/gtest.h>

#include <sstream>

#include "progress/progress.h"
#include "progress/progress_format.h"
#include "progress/task_progress.h"

namespace folio {
namespace {

struct FakeClock {
  double now = 1000;
  SecondsClock function() {
    return [this] { return now; };
  }
};

StatusLine terminal(std::ostream& out, int columns = 120, bool unicode = false) {
  return StatusLine(out, TerminalTraits{true, columns, unicode});
}

StatusLine plain(std::ostream& out) { return StatusLine(out, TerminalTraits{false, 80, false}); }

StepReport measured_step(int64_t step, double loss) {
  StepReport report;
  report.step = step;
  report.loss = loss;
  report.learning_rate = 1e-3;
  report.ms_per_step = 12.5;
  report.tokens_per_second = 61440;
  report.mfu = 0.125;
  return report;
}

// What a terminal shows after `output`: each "\r" returns to the line start, ESC [K erases the
// rest; returns the lines on screen.
std::vector<std::string> screen(const std::string& output) {
  std::vector<std::string> lines(1);
  size_t column = 0;
  for (size_t i = 0; i < output.size(); ++i) {
    std::string& line = lines.back();
    if (output.compare(i, 3, "\x1b[K") == 0) {
      line.resize(column);
      i += 2;
    } else if (output[i] == '\r') {
      column = 0;
    } else if (output[i] == '\n') {
      lines.emplace_back();
      column = 0;
    } else {
      if (column < line.size()) line[column] = output[i];
      else line += output[i];
      ++column;
    }
  }
  if (lines.back().empty()) lines.pop_back();
  return lines;
}

TEST(ProgressFormat, DurationsCountsAndBars) {
  EXPECT_EQ(format_duration(7.4), "0:07");
  EXPECT_EQ(format_duration(754), "12:34");
  EXPECT_EQ(format_duration(3 * 3600 + 5 * 60 + 9), "3:05:09");
  EXPECT_EQ(format_duration(kNotMeasured), "?");
  EXPECT_EQ(format_count(950), "950");
  EXPECT_EQ(format_count(55324), "55.3k");
  EXPECT_EQ(format_count(1214000), "1.21M");
  EXPECT_EQ(format_count(999700), "1.00M");  // rounding carries into the next suffix
  EXPECT_EQ(format_count(99950), "100k");     // and past a number of decimals
  EXPECT_EQ(format_count(9996), "10.0k");
  EXPECT_EQ(format_count(-0.0), "0");
  EXPECT_EQ(progress_bar(0.5, 10, false), "#####.....");
  EXPECT_EQ(progress_bar(1.5, 4, false), "####");
  EXPECT_EQ(progress_bar(0.25, 4, true), "\u2588\u2591\u2591\u2591");
  EXPECT_EQ(display_width("\u2588\u2591ab"), 4);
}

TEST(ProgressFormat, NarrowTerminalsDropTheLeastImportantFieldsFirst) {
  const std::vector<StatusField> fields = {{"loss 2.1523", 3}, {"55.3k tok/s", 1},
                                           {"ETA 0:21", 2}};
  const std::string wide = fit_status_line("500/2000", 0.25, fields, 120, false);
  EXPECT_EQ(wide, "500/2000 " + std::string(7, '#') + std::string(23, '.') +
                      "  25% | loss 2.1523 | 55.3k tok/s | ETA 0:21");
  for (int columns = 20; columns <= 120; ++columns) {
    const std::string fitted = fit_status_line("500/2000", 0.25, fields, columns, true);
    EXPECT_LT(display_width(fitted), columns) << fitted;
  }
  const std::string narrow = fit_status_line("500/2000", 0.25, fields, 60, false);
  EXPECT_NE(narrow.find("loss 2.1523"), std::string::npos) << narrow;
  EXPECT_NE(narrow.find("ETA"), std::string::npos) << narrow;
  EXPECT_EQ(narrow.find("tok/s"), std::string::npos) << narrow;
}

TEST(TrainingProgress, TerminalRedrawsOneLineAndPrintsOtherLinesAboveIt) {
  std::ostringstream out;
  FakeClock clock;
  TrainingProgress progress({.total_steps = 100}, terminal(out), clock.function());
  for (int64_t step = 1; step <= 100; ++step) {
    clock.now += 0.02;  // 50 steps a second: redrawn every 5th step, 10 times a second
    progress.step_done(measured_step(step, 4.0 - step * 0.01));
    if (step == 50) progress.eval_done(50, 3.5, 3.6);
  }
  progress.finish();
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << "the eval line and the kept status";
  EXPECT_EQ(text.find("iter "), std::string::npos) << "no plain lines on a terminal";
  const std::vector<std::string> lines = screen(text);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "step 50: train loss 3.5000, val loss 3.6000");
  EXPECT_EQ(lines[1].rfind("100/100 ", 0), 0u) << lines[1];
  for (const char* field : {"100%", "loss 3.0000", "val 3.6000", "12.5 ms/step", "61.4k tok/s",
                            "MFU 12.5%", "done in 0:02"})
    EXPECT_NE(lines[1].find(field), std::string::npos) << field << " in " << lines[1];
  const size_t redraws = std::count(text.begin(), text.end(), '\r');
  EXPECT_GE(redraws, 20u);
  EXPECT_LE(redraws, 25u) << "at most ten redraws a second";
}

TEST(TrainingProgress, TerminalLineShowsTheRemainingTimeAndFitsTheWidth) {
  std::ostringstream out;
  FakeClock clock;
  TrainingProgress progress({.total_steps = 2000}, terminal(out, 72, true), clock.function());
  clock.now += 10;
  progress.step_done(measured_step(500, 2.1523));
  const std::vector<std::string> lines = screen(out.str());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_LT(display_width(lines[0]), 72);
  EXPECT_NE(lines[0].find("ETA 0:30"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("loss 2.1523"), std::string::npos) << lines[0];
}

TEST(TrainingProgress, UnmeasuredStepsKeepTheLastLoss) {
  std::ostringstream out;
  FakeClock clock;
  TrainingProgress progress({.total_steps = 10}, terminal(out), clock.function());
  progress.step_done(measured_step(1, 3.25));
  clock.now += 1;
  StepReport unmeasured;
  unmeasured.step = 2;
  progress.step_done(unmeasured);
  EXPECT_NE(screen(out.str()).back().find("2/10"), std::string::npos);
  EXPECT_NE(screen(out.str()).back().find("loss 3.2500"), std::string::npos);
}

TEST(TrainingProgress, PlainLinesComeAtTheFirstStepThenEveryTenSecondsAndAtTheEnd) {
  std::ostringstream out;
  FakeClock clock;
  TrainingProgress progress({.total_steps = 800}, plain(out), clock.function());
  for (int64_t step = 1; step <= 800; ++step) {
    clock.now += 0.0625;  // 50 s in all, in steps a double holds exactly
    if (step % 10 == 0) progress.step_done(measured_step(step, 2.0));
    else progress.step_done({.step = step});
    if (step == 400) progress.eval_done(400, 1.9, 2.1);
  }
  progress.finish();
  const std::string text = out.str();
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  std::istringstream lines(text);
  std::vector<std::string> iter_steps;
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("iter ", 0) == 0) iter_steps.push_back(line.substr(5, line.find(':') - 5));
  }
  // Measured every 10th step (0.625 s apart): the first, then the first measured step at least
  // 10 s after the line before, and the last.
  EXPECT_EQ(iter_steps, (std::vector<std::string>{"10/800", "170/800", "330/800", "490/800",
                                                  "650/800", "800/800"}));
  EXPECT_NE(text.find("iter 10/800: loss 2.0000, lr 1.00e-03, 12.5 ms/step, 61440 tokens/s, "
                      "MFU 12.5%, ETA 0:49\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("step 400: train loss 1.9000, val loss 2.1000\n"), std::string::npos);
  EXPECT_NE(text.find("iter 800/800: loss 2.0000, lr 1.00e-03, 12.5 ms/step, 61440 tokens/s, "
                      "MFU 12.5%, done in 0:50\n"),
            std::string::npos)
      << text;
}

TEST(TrainingProgress, FinishPrintsAnUnprintedLastStep) {
  std::ostringstream out;
  FakeClock clock;
  TrainingProgress progress({.total_steps = 100}, plain(out), clock.function());
  progress.step_done(measured_step(1, 3.0));
  clock.now += 1;
  progress.step_done(measured_step(2, 2.5));  // within 10 s of the first line: not printed
  progress.finish();
  EXPECT_NE(out.str().find("iter 2/100: loss 2.5000"), std::string::npos) << out.str();
}

// A run stopped (Ctrl-C) at step 37 whose loss was last measured at step 30: the last line
// names step 37 and says its figures are step 30's, on a terminal and in plain lines.
TEST(TrainingProgress, AStoppedRunsLastLineSaysWhichStepItsFiguresAreOf) {
  for (bool is_terminal : {true, false}) {
    std::ostringstream out;
    FakeClock clock;
    TrainingProgress progress({.total_steps = 100},
                              StatusLine(out, TerminalTraits{is_terminal, 160, false}),
                              clock.function());
    for (int64_t step = 1; step <= 37; ++step) {
      clock.now += 20;  // every measured step is due a plain line
      if (step % 10 == 0) progress.step_done(measured_step(step, 4.0 - step * 0.01));
      else progress.step_done({.step = step});
    }
    progress.finish();
    const std::string last = screen(out.str()).back();
    const std::string step_text = is_terminal ? " 37/100 " : "iter 37/100 ";
    EXPECT_NE(last.find(step_text), std::string::npos) << last;
    EXPECT_NE(last.find("3.7000"), std::string::npos) << last;
    EXPECT_NE(last.find("step 30"), std::string::npos)
        << "step 30's loss shown under step 37 without saying so: " << last;
  }
}

TEST(TrainingProgress, QuietPrintsNoProgressButStillTheResults) {
  for (bool is_terminal : {true, false}) {
    std::ostringstream out;
    FakeClock clock;
    TrainingProgress progress({.total_steps = 20, .quiet = true},
                              StatusLine(out, TerminalTraits{is_terminal, 80, false}),
                              clock.function());
    for (int64_t step = 1; step <= 20; ++step) {
      clock.now += 1;
      progress.step_done(measured_step(step, 2.0));
    }
    progress.eval_done(20, 1.5, 1.6);
    progress.line("saved out/ckpt.safetensors");
    progress.finish();
    EXPECT_EQ(out.str(),
              "step 20: train loss 1.5000, val loss 1.6000\nsaved out/ckpt.safetensors\n");
  }
}

TEST(TrainingProgress, OnlyThePrinterRankPrints) {
  std::ostringstream out;
  TrainingProgress progress({.total_steps = 5, .is_printer = false}, terminal(out));
  progress.step_done(measured_step(5, 2.0));
  progress.eval_done(5, 1.0, 1.0);
  progress.line("hello");
  progress.finish();
  EXPECT_EQ(out.str(), "");
}

TEST(TrainingProgress, ClearLeavesACleanLineForStreamedOutput) {
  std::ostringstream out;
  FakeClock clock;
  TrainingProgress progress({.total_steps = 10}, terminal(out), clock.function());
  progress.step_done(measured_step(3, 2.0));
  progress.clear();
  out << "streamed sample\n";
  const std::vector<std::string> lines = screen(out.str());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "streamed sample");
}

TEST(TaskProgress, QuickTasksShowNothing) {
  for (bool is_terminal : {true, false}) {
    std::ostringstream out;
    FakeClock clock;
    {
      TaskProgress task("preparing data", 100, "bytes",
                        StatusLine(out, TerminalTraits{is_terminal, 80, false}), true,
                        clock.function());
      for (int i = 0; i < 100; ++i) {
        clock.now += 0.001;
        task.advance(1);
      }
    }
    EXPECT_EQ(out.str(), "");
  }
}

TEST(TaskProgress, TerminalShowsABarAfterHalfASecondThenOneLineWhenDone) {
  std::ostringstream out;
  FakeClock clock;
  TaskProgress task("preparing input.txt", 50e6, "bytes", terminal(out), true, clock.function());
  for (int i = 1; i <= 50; ++i) {
    clock.now += 0.1;
    task.set_done(i * 1e6);
    if (i == 26) {
      const std::string status = screen(out.str()).back();
      EXPECT_EQ(status.rfind("preparing input.txt ", 0), 0u) << status;
      EXPECT_NE(status.find(" 52% | 26.0M/50.0M bytes | ETA 0:02"), std::string::npos)
          << status;
    }
  }
  task.finish();
  const std::vector<std::string> lines = screen(out.str());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "preparing input.txt: 50.0M bytes in 5.0 s");
}

TEST(TaskProgress, PlainLinesAfterTwoSecondsThenEveryTen) {
  std::ostringstream out;
  FakeClock clock;
  TaskProgress task("evaluating val", 300, "windows", plain(out), true, clock.function());
  for (int i = 1; i <= 300; ++i) {
    clock.now += 0.1;  // 30 s in all
    task.advance();
  }
  task.finish();
  EXPECT_EQ(out.str(),
            "evaluating val: 6% (20/300 windows), ETA 0:28\n"
            "evaluating val: 40% (120/300 windows), ETA 0:18\n"
            "evaluating val: 73% (220/300 windows), ETA 0:08\n"
            "evaluating val: 300 windows in 30.0 s\n");
}

TEST(TaskProgress, AFractionWithoutAUnitShowsNoAmounts) {
  std::ostringstream out;
  FakeClock clock;
  TaskProgress task("preparing input.txt", 1, "", plain(out), true, clock.function());
  for (int i = 1; i <= 4; ++i) {
    clock.now += 1;
    task.set_done(i / 4.0);
  }
  task.finish();
  EXPECT_EQ(out.str(),
            "preparing input.txt: 50%, ETA 0:02\n"
            "preparing input.txt: done in 4.0 s\n");
}

TEST(TaskProgress, AnUnfinishedTaskOnlyErasesItsLine) {
  std::ostringstream out;
  FakeClock clock;
  {
    TaskProgress task("preparing input.txt", 10, "bytes", terminal(out), true, clock.function());
    clock.now += 1;
    task.set_done(5);  // shown; then an exception leaves the scope
  }
  EXPECT_EQ(screen(out.str()), std::vector<std::string>{});
  EXPECT_EQ(out.str().find("in 1.0 s"), std::string::npos);
}

TEST(TaskProgress, DisabledShowsNothing) {
  std::ostringstream out;
  FakeClock clock;
  TaskProgress task("evaluating", 10, "windows", terminal(out), false, clock.function());
  clock.now += 100;
  task.advance(5);
  task.finish();
  EXPECT_EQ(out.str(), "");
}

}  // namespace
}  // namespace folio
