// What every fuzz target asserts beyond "no crash, no sanitizer report": an abort here is a
// finding that libFuzzer saves like a crash.
#pragma once

#include <cstdlib>
#include <string_view>

#include "core/error.h"

namespace folio::fuzz {

// An invariant of a successful parse or load (a round trip, a bound).
inline void check(bool condition) {
  if (!condition) std::abort();
}

// A refusal is one line (main prints it as "folio: error: <message>"); with `max_length`, also
// short, which holds where every quoted value went through printable().
inline void check_message(const Error& error, size_t max_length = std::string_view::npos) {
  const std::string_view message = error.what();
  check(!message.empty() && message.find_first_of("\n\r") == std::string_view::npos);
  check(message.size() <= max_length);
}

}  // namespace folio::fuzz
