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

// About `target_ticks` ticks covering [low, high]; an empty range (low == high) is widened.
AxisScale nice_scale(double low, double high, int target_ticks);

// A tick's label with as many decimals as the scale's step needs ("1.5", "250"); on an axis
// reaching 10,000 or more every label but 0 takes the same SI suffix ("0", "20k", "40k").
std::string tick_label(double value, const AxisScale& scale);

}  // namespace folio
