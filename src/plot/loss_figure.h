// The figure `folio plot` draws from one or more runs: loss against step (each run's training
// loss as a light line, its validation loss as a dark line with a dot per evaluation), and below
// it the training speed in tokens/s. Runs are told apart by colour, in this order: blue, orange,
// green, red, purple, brown, pink, olive, cyan (matplotlib's palette, grey left out for the
// axes), then again.
#pragma once

#include <vector>

#include "plot/figure.h"
#include "plot/run_metrics.h"

namespace folio {

// The colour of the run at `index`; its training loss is drawn with this colour tinted half way
// to white.
Colour run_colour(size_t index);
inline constexpr double kTrainTint = 0.5;

Figure loss_figure(const std::vector<RunMetrics>& runs, int width, int height);

}  // namespace folio
