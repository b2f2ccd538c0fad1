// The clock progress displays read: seconds on a steady clock, replaceable so that tests can
// step time by hand instead of sleeping.
#pragma once

#include <chrono>
#include <functional>

namespace folio {

using SecondsClock = std::function<double()>;

inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace folio
