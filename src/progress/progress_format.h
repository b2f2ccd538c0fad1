// The pieces a progress display is made of: durations, large counts, a bar, and a status line
// cut to the terminal's width by dropping its least important fields first.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace folio {

// "0:07", "12:34", "3:05:09"; "?" when the duration is unknown (not finite or negative).
std::string format_duration(double seconds);

// Three significant digits with an SI suffix: "950", "55.3k", "1.21M", "3.40G".
std::string format_count(double value);

// `width` cells filled to `fraction` (clamped to [0, 1]): "█████░░░░░", or "#####....." where the
// terminal may not show Unicode.
std::string progress_bar(double fraction, int width, bool unicode);

// Columns a UTF-8 string takes: one per code point (the bar and the text are all single-width).
int display_width(std::string_view text);

// One field of a status line ("loss 2.1523"); when columns run short the least important fields
// are dropped first.
struct StatusField {
  std::string text;
  int importance = 0;
};

// `head`, a bar showing `fraction` and its percentage, then the fields joined by " | " in their
// order, in no more than `columns` - 1 cells (the last column stays empty so that the terminal
// never wraps, which would break redrawing in place). As columns run short the bar shrinks from
// 30 cells to 10, then the least important fields go, then the bar, then the line is cut.
// A negative `fraction` means no bar and no percentage (a task of unknown size).
std::string fit_status_line(const std::string& head, double fraction,
                            std::vector<StatusField> fields, int columns, bool unicode);

}  // namespace folio
