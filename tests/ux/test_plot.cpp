// The plotting module: scales and tick labels, reading a run's records, the figure `folio plot`
// builds, and the files cairo writes (the PNG read back with cairo, the SVG as text).
#include <gtest/gtest.h>

#include <cairo.h>

#include <cmath>
#include <fstream>
#include <regex>

#include "io/metrics_log.h"
#include "plot/cairo_handles.h"
#include "plot/loss_figure.h"
#include "plot/render.h"
#include "plot/run_metrics.h"
#include "plot/ticks.h"
#include "test_helpers.h"

namespace folio {
namespace {

// A recorded run, as the trainer writes it: a training record every 10 steps, an evaluation
// every 100 and at the last step. Runs differ in speed and in the loss they level off at.
std::string record_run(const testing::TempDir& dir, const std::string& name, double speed,
                       double final_loss = 1.5) {
  const std::string run = dir.file(name);
  std::filesystem::create_directories(run);
  MetricsLog log(run + "/metrics.jsonl", false);
  for (int step = 0; step <= 500; step += 10) {
    const double loss = final_loss + (4.2 - final_loss) * std::exp(-step / 120.0);
    if (step > 0)
      log.write({{"type", "train"}, {"step", step}, {"loss", loss + 0.08 * std::sin(step)},
                 {"tokens_per_s", speed * (1 + 0.05 * std::cos(step))}, {"tokens", step * 768}});
    if (step % 100 == 0 || step == 500)
      log.write({{"type", "eval"}, {"step", step}, {"train_loss", loss - 0.02},
                 {"val_loss", loss + 0.1}, {"tokens", step * 768}});
  }
  return run;
}

bool near(uint32_t pixel, const Colour& colour, int tolerance) {
  const int red = (pixel >> 16) & 0xff, green = (pixel >> 8) & 0xff, blue = pixel & 0xff;
  return std::abs(red - static_cast<int>(std::lround(colour.red * 255))) <= tolerance &&
         std::abs(green - static_cast<int>(std::lround(colour.green * 255))) <= tolerance &&
         std::abs(blue - static_cast<int>(std::lround(colour.blue * 255))) <= tolerance;
}

// Pixels of a PNG (read back with cairo) within `tolerance` of `colour` per channel.
int pixels_of(cairo_surface_t* image, const Colour& colour, int tolerance = 6) {
  const int width = cairo_image_surface_get_width(image);
  const int height = cairo_image_surface_get_height(image);
  const int stride = cairo_image_surface_get_stride(image);
  const unsigned char* data = cairo_image_surface_get_data(image);
  int count = 0;
  for (int y = 0; y < height; ++y) {
    const auto* row = reinterpret_cast<const uint32_t*>(data + static_cast<size_t>(y) * stride);
    for (int x = 0; x < width; ++x) count += near(row[x], colour, tolerance);
  }
  return count;
}

TEST(PlotScale, TicksFallOnRoundNumbersCoveringTheData) {
  const AxisScale loss = nice_scale(1.47, 4.21, 7);
  EXPECT_DOUBLE_EQ(loss.step, 0.5);
  EXPECT_DOUBLE_EQ(loss.low, 1.0);
  EXPECT_DOUBLE_EQ(loss.high, 4.5);
  EXPECT_EQ(loss.ticks.size(), 8u);
  const AxisScale steps = nice_scale(0, 1999, 9);
  EXPECT_DOUBLE_EQ(steps.step, 250);
  EXPECT_DOUBLE_EQ(steps.high, 2000);
  const AxisScale flat = nice_scale(3, 3, 6);  // one value: still a usable axis around it
  EXPECT_LT(flat.low, 3);
  EXPECT_GT(flat.high, 3);
}

TEST(PlotScale, TickLabelsShareOneSuffixAndEnoughDecimals) {
  const AxisScale loss = nice_scale(1.47, 4.21, 7);
  EXPECT_EQ(tick_label(1.5, loss), "1.5");
  EXPECT_EQ(tick_label(2.0, loss), "2.0");
  const AxisScale speed = nice_scale(0, 61440, 6);
  EXPECT_EQ(tick_label(0, speed), "0");
  EXPECT_EQ(tick_label(20000, speed), "20k");
  const AxisScale quarter = nice_scale(0, 2500, 11);
  EXPECT_EQ(tick_label(250, quarter), "250");
}

TEST(RunMetrics, ReadsTrainingAndEvaluationSeries) {
  testing::TempDir dir;
  const RunMetrics run = read_run_metrics(record_run(dir, "baby", 50000));
  EXPECT_EQ(run.label, "baby");
  EXPECT_EQ(run.train_loss.size(), 50u);
  EXPECT_EQ(run.tokens_per_second.size(), 50u);
  EXPECT_EQ(run.val_loss.size(), 6u);
  EXPECT_DOUBLE_EQ(run.val_loss.back().x, 500);
  EXPECT_EQ(read_run_metrics(dir.file("baby") + "/").label, "baby");
  EXPECT_EQ(read_run_metrics(dir.file("baby/metrics.jsonl")).label, "baby");
}

TEST(RunMetrics, ALastLineCutShortIsSkippedAnyOtherBadLineIsAnError) {
  testing::TempDir dir;
  const std::string run = record_run(dir, "run", 1000);
  std::ofstream(run + "/metrics.jsonl", std::ios::app) << "{\"type\": \"tra";
  EXPECT_EQ(read_run_metrics(run).train_loss.size(), 50u);
  std::ofstream(run + "/metrics.jsonl", std::ios::app)
      << "\n{\"type\": \"train\", \"step\": 510}\n";  // the cut line is now line 57 of 58
  const std::string message = testing::error_message([&] { read_run_metrics(run); });
  EXPECT_NE(message.find("metrics.jsonl:57: not a metrics record"), std::string::npos) << message;
}

TEST(RunMetrics, MissingOrEmptyRunsNameTheFile) {
  testing::TempDir dir;
  EXPECT_NE(testing::error_message([&] { read_run_metrics(dir.file("nope")); })
                .find("nope/metrics.jsonl does not exist or cannot be read: pass the out_dir"),
            std::string::npos);
  dir.write("metrics.jsonl", "");
  EXPECT_NE(testing::error_message([&] { read_run_metrics(dir.file("metrics.jsonl")); })
                .find("holds no training or evaluation records yet"),
            std::string::npos);
}

TEST(LossFigure, EachRunHasAColourItsTrainLineATintOfIt) {
  testing::TempDir dir;
  const Figure figure = loss_figure({read_run_metrics(record_run(dir, "a", 50000)),
                                     read_run_metrics(record_run(dir, "b", 20000))},
                                    960, 640);
  EXPECT_EQ(figure.title, "folio: a, b");
  ASSERT_EQ(figure.panels.size(), 2u);
  const std::vector<Series>& loss = figure.panels[0].series;
  ASSERT_EQ(loss.size(), 4u);
  EXPECT_EQ(loss[0].label, "a train");
  EXPECT_EQ(loss[1].label, "a val");
  EXPECT_EQ(loss[2].label, "b train");
  EXPECT_EQ(loss[3].label, "b val");
  EXPECT_DOUBLE_EQ(loss[1].colour.blue, run_colour(0).blue);
  EXPECT_DOUBLE_EQ(loss[0].colour.red, run_colour(0).tinted(kTrainTint).red);
  EXPECT_TRUE(loss[1].markers);
  EXPECT_EQ(figure.panels[1].series.size(), 2u);
  EXPECT_EQ(figure.panels[1].y_label, "tokens/s");
}

CairoSurface drawn_png(const Figure& figure, const testing::TempDir& dir) {
  write_figure(figure, dir.file("loss.png"));
  CairoSurface image(cairo_image_surface_create_from_png(dir.file("loss.png").c_str()));
  EXPECT_EQ(cairo_surface_status(image.get()), CAIRO_STATUS_SUCCESS);
  return image;
}

TEST(PlotFiles, PngHasTheSizeAndTheColoursOfEverySeries) {
  testing::TempDir dir;
  Figure figure = loss_figure({read_run_metrics(record_run(dir, "a", 50000)),
                               read_run_metrics(record_run(dir, "b", 20000, 2.2))},
                              800, 500);
  const CairoSurface image = drawn_png(figure, dir);
  EXPECT_EQ(cairo_image_surface_get_width(image.get()), 800);
  EXPECT_EQ(cairo_image_surface_get_height(image.get()), 500);
  EXPECT_GT(pixels_of(image.get(), Colour{1, 1, 1}, 0), 800 * 500 / 2) << "a white page";
  EXPECT_EQ(pixels_of(image.get(), run_colour(2), 2), 0) << "a third run's colour";
  // The dark lines (val, tokens/s): far more pixels than the legend's swatches (22 x 2.5).
  for (size_t run = 0; run < 2; ++run)
    EXPECT_GT(pixels_of(image.get(), run_colour(run), 2), 300) << "run " << run;

  // A light train line shares its colour with the dark lines' anti-aliased edges, so it is
  // found as the difference it makes: the same figure without it has far fewer such pixels.
  const Colour train = run_colour(0).tinted(kTrainTint);
  const int with_train = pixels_of(image.get(), train, 20);
  figure.panels[0].series.erase(figure.panels[0].series.begin());  // "a train"
  const int without_train = pixels_of(drawn_png(figure, dir).get(), train, 20);
  EXPECT_GT(with_train - without_train, 300) << with_train << " vs " << without_train;
}

TEST(PlotFiles, SvgHasTheSizeOneStrokedPathPerSeriesAndTheLegendAsText) {
  testing::TempDir dir;
  const Figure figure = loss_figure({read_run_metrics(record_run(dir, "a", 50000)),
                                     read_run_metrics(record_run(dir, "b", 20000))},
                                    900, 600);
  const std::string svg = figure_svg(figure);
  EXPECT_NE(svg.find("width=\"900px\" height=\"600px\""), std::string::npos);
  EXPECT_NE(svg.find("<title>folio: a, b</title>"), std::string::npos);
  EXPECT_NE(svg.find("<desc>loss: a train; a val; b train; b val. training speed: a; b.</desc>"),
            std::string::npos);
  // Every stroke in a colour (not grey) is a series: 3 per run (train, val, tokens/s).
  const std::regex stroke(R"(stroke:rgb\(([\d.]+)%,([\d.]+)%,([\d.]+)%\))");
  int coloured = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), stroke);
       it != std::sregex_iterator(); ++it)
    coloured += (*it)[1] != (*it)[2] || (*it)[2] != (*it)[3];
  EXPECT_EQ(coloured, 6);
  write_figure(figure, dir.file("loss.svg"));
  std::ifstream written(dir.file("loss.svg"));
  const std::string file(std::istreambuf_iterator<char>(written), {});
  EXPECT_EQ(file.size(), svg.size()) << "the file holds the document figure_svg draws";
  EXPECT_NE(file.find("<title>folio: a, b</title>"), std::string::npos);
}

TEST(PlotFiles, TheFormatComesFromTheExtension) {
  EXPECT_EQ(image_format_of("a/b/LOSS.PNG"), ImageFormat::kPng);
  EXPECT_EQ(image_format_of("loss.svg"), ImageFormat::kSvg);
  EXPECT_NE(testing::error_message([] { image_format_of("loss.jpg"); })
                .find("name the file FILE.png or FILE.svg"),
            std::string::npos);
}

TEST(PlotFiles, AnUnwritableFileNamesIt) {
  testing::TempDir dir;
  const Figure figure = loss_figure({read_run_metrics(record_run(dir, "a", 1))}, 400, 300);
  EXPECT_NE(testing::error_message([&] { write_figure(figure, "/nonexistent/loss.png"); })
                .find("cannot write /nonexistent/loss.png"),
            std::string::npos);
}

}  // namespace
}  // namespace folio
