#include "plot/ticks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace folio {

namespace {

int tick_count(double low, double high, double step) {
  return static_cast<int>(std::ceil(high / step - 1e-9) - std::floor(low / step + 1e-9)) + 1;
}

// The round step (1, 2, 2.5 or 5 times a power of ten) whose ticks come nearest to the target
// in number; on a tie the fewer ticks.
double round_step(double low, double high, int target_ticks) {
  const double rough = (high - low) / std::max(target_ticks - 1, 1);
  const double power = std::pow(10.0, std::floor(std::log10(rough)));
  double best = 10 * power;
  for (double multiple : {5.0, 2.5, 2.0, 1.0}) {
    const double step = multiple * power;
    if (std::abs(tick_count(low, high, step) - target_ticks) <
        std::abs(tick_count(low, high, best) - target_ticks))
      best = step;
  }
  return best;
}

int decimals_for(double step) {
  int decimals = 0;
  while (decimals < 9 && std::fabs(step * std::pow(10.0, decimals) -
                                   std::round(step * std::pow(10.0, decimals))) > 1e-6)
    ++decimals;
  return decimals;
}

}  // namespace

AxisScale nice_scale(double low, double high, int target_ticks) {
  low = std::clamp(low, -kLargestPlotted, kLargestPlotted);
  high = std::clamp(high, -kLargestPlotted, kLargestPlotted);
  if (!(high > low)) {  // one value, or none: a unit-wide window around it
    const double centre = std::isfinite(low) ? low : 0;
    const double half = centre == 0 ? 1 : std::fabs(centre) * 0.1;
    low = centre - half;
    high = centre + half;
  }
  AxisScale scale;
  scale.step = round_step(low, high, target_ticks);
  scale.low = std::floor(low / scale.step + 1e-9) * scale.step;
  scale.high = std::ceil(high / scale.step - 1e-9) * scale.step;
  const int count = static_cast<int>(std::llround((scale.high - scale.low) / scale.step));
  for (int i = 0; i <= count; ++i) {
    const double tick = scale.low + i * scale.step;
    scale.ticks.push_back(std::fabs(tick) < scale.step * 1e-9 ? 0.0 : tick);  // no "-0"
  }
  return scale;
}

std::string tick_label(double value, const AxisScale& scale) {
  if (value == 0) return "0";
  const double largest = std::max(std::fabs(scale.low), std::fabs(scale.high));
  const double divisor = largest >= 1e7 ? 1e6 : largest >= 1e4 ? 1e3 : 1;
  const char* suffix = divisor == 1e6 ? "M" : divisor == 1e3 ? "k" : "";
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.*f%s", decimals_for(scale.step / divisor),
                value / divisor, suffix);
  return buffer;
}

}  // namespace folio
