// Number formatting shared by logs, JSON lines and the config printer.
#pragma once

#include <charconv>
#include <cstdio>
#include <string>

namespace folio {

// The shortest text that reads back as the same double, as Python's repr(float) prints it
// ("10.788929", "0.0003", "1e-08").
inline std::string shortest_double(double value) {
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, result.ptr);
  // Python writes exponents with at least two digits (1e-08); to_chars writes 1e-08 too.
  return text;
}

inline std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, value);
  return buffer;
}

}  // namespace folio
