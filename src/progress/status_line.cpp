#include "progress/status_line.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string_view>

namespace folio {

namespace {

constexpr const char* kEraseToEndOfLine = "\x1b[K";

int terminal_columns(int fd) {
  winsize size{};
  if (fd >= 0 && ::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  if (const char* columns = std::getenv("COLUMNS")) {
    const int parsed = std::atoi(columns);
    if (parsed > 0) return parsed;
  }
  return 80;
}

bool locale_is_utf8() {
  for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    const std::string_view text(value);
    return text.find("UTF-8") != std::string_view::npos ||
           text.find("utf-8") != std::string_view::npos ||
           text.find("UTF8") != std::string_view::npos ||
           text.find("utf8") != std::string_view::npos;
  }
  return false;
}

}  // namespace

TerminalTraits detect_terminal(int fd) {
  const char* term = std::getenv("TERM");
  TerminalTraits traits;
  traits.is_terminal = ::isatty(fd) == 1 && !(term != nullptr && std::strcmp(term, "dumb") == 0);
  traits.columns = terminal_columns(fd);
  traits.unicode = locale_is_utf8();
  return traits;
}

StatusLine::StatusLine(std::ostream& out, TerminalTraits traits, int fd)
    : out_(&out), traits_(traits), fd_(fd) {}

StatusLine StatusLine::standard_output() {
  return StatusLine(std::cout, detect_terminal(STDOUT_FILENO), STDOUT_FILENO);
}

StatusLine StatusLine::standard_error() {
  return StatusLine(std::cerr, detect_terminal(STDERR_FILENO), STDERR_FILENO);
}

int StatusLine::columns() const {
  return traits_.is_terminal && fd_ >= 0 ? terminal_columns(fd_) : traits_.columns;
}

void StatusLine::show(const std::string& text) {
  if (!traits_.is_terminal) return;
  *out_ << '\r' << text << kEraseToEndOfLine << std::flush;
  shown_ = text;
}

void StatusLine::clear() {
  if (shown_.empty()) return;
  *out_ << '\r' << kEraseToEndOfLine << std::flush;
  shown_.clear();
}

void StatusLine::print(const std::string& line) {
  const std::string status = shown_;
  clear();
  *out_ << line << '\n';
  if (!status.empty()) show(status);
  *out_ << std::flush;
}

void StatusLine::keep() {
  if (shown_.empty()) return;
  *out_ << '\n' << std::flush;
  shown_.clear();
}

}  // namespace folio
