#include "progress/progress_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace folio {

namespace {

constexpr int kWidestBar = 30;
constexpr int kNarrowestBar = 10;

std::string percent_text(double fraction) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "%3d%%",
                static_cast<int>(std::floor(100.0 * std::clamp(fraction, 0.0, 1.0))));
  return buffer;
}

// The head, the bar (when bar_width > 0) and the percentage (when fraction >= 0), the fields.
std::string compose(const std::string& head, double fraction, int bar_width, bool unicode,
                    const std::vector<StatusField>& fields) {
  std::string text = head;
  if (bar_width > 0) text.append(" ").append(progress_bar(fraction, bar_width, unicode));
  if (fraction >= 0) text.append(" ").append(percent_text(fraction));
  for (const StatusField& field : fields) text.append(" | ").append(field.text);
  return text;
}

// Removes the least important field (the last of equally unimportant ones).
void drop_least_important(std::vector<StatusField>& fields) {
  auto least = fields.begin();
  for (auto it = fields.begin(); it != fields.end(); ++it)
    if (it->importance <= least->importance) least = it;
  fields.erase(least);
}

std::string cut_to_width(const std::string& text, int width) {
  int seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool starts_code_point = (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
    if (starts_code_point && seen++ == width) return text.substr(0, i);
  }
  return text;
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long long total = std::llround(seconds);
  const long long hours = total / 3600, minutes = total / 60 % 60, rest = total % 60;
  char buffer[32];
  if (hours > 0)
    std::snprintf(buffer, sizeof(buffer), "%lld:%02lld:%02lld", hours, minutes, rest);
  else
    std::snprintf(buffer, sizeof(buffer), "%lld:%02lld", minutes, rest);
  return buffer;
}

std::string format_count(double value) {
  if (!std::isfinite(value)) return "?";
  if (value == 0) value = 0;  // -0 prints as 0
  static const char* const kSuffixes[] = {"", "k", "M", "G", "T", "P"};
  size_t suffix = 0;
  double scaled = value;
  char buffer[32];
  while (true) {
    const auto decimals_for = [&](double magnitude) {
      return suffix == 0 || magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : 2;
    };
    // Three significant digits of the value as it will print: 99.95k rounds to 100.0 at one
    // decimal, so it takes none (100k, not 100.0k).
    const int first_guess = decimals_for(std::fabs(scaled));
    const double scale = std::pow(10, first_guess);
    const int decimals = decimals_for(std::round(std::fabs(scaled) * scale) / scale);
    std::snprintf(buffer, sizeof(buffer), "%.*f%s", decimals, scaled, kSuffixes[suffix]);
    // Rounding can carry into the next suffix: 999.7k prints as 1.00M, not 1000k.
    const bool carries = std::fabs(std::round(scaled * std::pow(10, decimals))) >=
                         1000 * std::pow(10, decimals);
    if (!carries || suffix + 1 == std::size(kSuffixes)) return buffer;
    scaled /= 1000;
    ++suffix;
  }
}

std::string progress_bar(double fraction, int width, bool unicode) {
  const int filled =
      static_cast<int>(std::floor(std::clamp(fraction, 0.0, 1.0) * width + 1e-9));
  std::string bar;
  for (int i = 0; i < width; ++i) {
    if (unicode) bar += i < filled ? "\u2588" : "\u2591";  // full block, light shade
    else bar += i < filled ? '#' : '.';
  }
  return bar;
}

int display_width(std::string_view text) {
  return static_cast<int>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

std::string fit_status_line(const std::string& head, double fraction,
                            std::vector<StatusField> fields, int columns, bool unicode) {
  const int limit = std::max(columns - 1, 1);
  while (true) {
    const std::string without_bar = compose(head, fraction, 0, unicode, fields);
    const int spare = limit - display_width(without_bar);
    const int bar_room = spare - 1;  // the bar takes a space before it
    if (fraction >= 0 && bar_room >= kNarrowestBar)
      return compose(head, fraction, std::min(bar_room, kWidestBar), unicode, fields);
    if (fraction < 0 && spare >= 0) return without_bar;
    if (fields.empty()) return cut_to_width(without_bar, limit);
    drop_least_important(fields);
  }
}

}  // namespace folio
