// Text that came from a file or the command line, made safe to quote in a one-line error
// message: a hostile value must neither break the line (a newline, a NUL that would end the
// message early) nor fill the screen.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace folio {

// `text` with control characters escaped (\n, \r, \t, \xNN) and, past `limit` bytes, cut at a
// character boundary and marked with "...".
inline std::string printable(std::string_view text, size_t limit = 80) {
  size_t cut = text.size();
  if (cut > limit) {
    cut = limit;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  }
  std::string out;
  for (const char character : text.substr(0, cut)) {
    const auto byte = static_cast<unsigned char>(character);
    if (byte == '\n')
      out += "\\n";
    else if (byte == '\r')
      out += "\\r";
    else if (byte == '\t')
      out += "\\t";
    else if (byte < 0x20 || byte == 0x7F) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02X", byte);
      out += escaped;
    } else {
      out += character;
    }
  }
  if (cut < text.size()) out += "...";
  return out;
}

// True when `text` holds a control character (which printable() would escape).
inline bool has_control_character(std::string_view text) {
  for (const char character : text) {
    const auto byte = static_cast<unsigned char>(character);
    if (byte < 0x20 || byte == 0x7F) return true;
  }
  return false;
}

}  // namespace folio
