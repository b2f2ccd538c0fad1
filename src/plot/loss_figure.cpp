#include "plot/loss_figure.h"

#include <array>

namespace folio {

Colour run_colour(size_t index) {
  static const std::array<Colour, 9> palette = {
      Colour::from_rgb(31, 119, 180),  Colour::from_rgb(255, 127, 14),
      Colour::from_rgb(44, 160, 44),   Colour::from_rgb(214, 39, 40),
      Colour::from_rgb(148, 103, 189), Colour::from_rgb(140, 86, 75),
      Colour::from_rgb(227, 119, 194), Colour::from_rgb(188, 189, 34),
      Colour::from_rgb(23, 190, 207)};
  return palette[index % palette.size()];
}

Figure loss_figure(const std::vector<RunMetrics>& runs, int width, int height) {
  Panel loss;
  loss.title = "loss";
  loss.x_label = "step";
  loss.y_label = "cross-entropy loss";
  Panel speed;
  speed.title = "training speed";
  speed.x_label = "step";
  speed.y_label = "tokens/s";
  speed.height_share = 0.45;
  speed.y_from_zero = true;
  const bool several = runs.size() > 1;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunMetrics& run = runs[i];
    const Colour colour = run_colour(i);
    const std::string prefix = several ? run.label + " " : "";
    // Without training records (log_interval 0) the evaluations' train loss stands in.
    if (!run.train_loss.empty())
      loss.series.push_back({prefix + "train", colour.tinted(kTrainTint), 2, false,
                             run.train_loss});
    else if (!run.eval_train_loss.empty())
      loss.series.push_back({prefix + "train (eval)", colour.tinted(kTrainTint), 2, true,
                             run.eval_train_loss});
    if (!run.val_loss.empty())
      loss.series.push_back({prefix + "val", colour, 2.5, true, run.val_loss});
    if (!run.tokens_per_second.empty())
      speed.series.push_back({several ? run.label : "", colour, 1.5, false,
                              run.tokens_per_second});
  }
  Figure figure;
  figure.title = "folio:";
  for (size_t i = 0; i < runs.size(); ++i) figure.title += (i ? ", " : " ") + runs[i].label;
  figure.width = width;
  figure.height = height;
  figure.panels.push_back(std::move(loss));
  if (!speed.series.empty()) figure.panels.push_back(std::move(speed));
  return figure;
}

}  // namespace folio
