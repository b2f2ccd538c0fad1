// Axis ranges and tick marks at round numbers: steps of 1, 2, 2.5 or 5 times a power of ten.
#pragma once

#include <string>
#include <vector>

namespace folio {

struct AxisScale {
  double low = 0, high = 1;   // the axis's ends: [data low, data high] widened to whole steps
  double step = 0.2;          // between ticks
  std::vector<double> ticks;  // low, low + step, ..., high
};

// The largest magnitude drawn. A larger value is no loss, step or speed folio writes (a float's
// largest is 3.4e38): it is drawn as a gap, as a non-finite one is, so that the axis arithmetic
// (the range, its steps of ten) stays finite. A metrics file with 1e308 and -1e308 had made the
// range infinite and the tick loop never end.
constexpr double kLargestPlotted = 1e150;

// About `target_ticks` ticks covering [low, high] (each clamped to ±kLargestPlotted); an empty
// range (low == high) is widened.
AxisScale nice_scale(double low, double high, int target_ticks);

// A tick's label with as many decimals as the scale's step needs ("1.5", "250"); on an axis
// reaching 10,000 or more every label but 0 takes the same SI suffix ("0", "20k", "40k").
std::string tick_label(double value, const AxisScale& scale);

}  // namespace folio
