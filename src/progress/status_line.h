// Where live progress is drawn. On an interactive terminal one status line is redrawn in place
// ("\r", the text, then ESC [K to erase what a longer earlier text left) and ordinary lines are
// printed above it. On anything else (a log file, a pipe, CI) nothing is ever redrawn: the
// progress classes ask is_terminal() and print plain lines instead.
#pragma once

#include <ostream>
#include <string>

namespace folio {

struct TerminalTraits {
  bool is_terminal = false;  // understands "\r" and ESC [K, and a person is watching
  int columns = 80;
  bool unicode = false;  // the locale is UTF-8, so the bar may use block characters
};

// What file descriptor `fd` is: a terminal when isatty() says so and TERM is not "dumb"; its
// width from the terminal (TIOCGWINSZ), else $COLUMNS, else 80; Unicode when LC_ALL, LC_CTYPE
// or LANG (the first one set) names UTF-8.
TerminalTraits detect_terminal(int fd);

class StatusLine {
 public:
  // Progress written to `out`, which `traits` describes. When `fd` >= 0 the terminal is asked
  // for its width at every redraw, so that a resized window is followed.
  StatusLine(std::ostream& out, TerminalTraits traits, int fd = -1);
  static StatusLine standard_output();  // std::cout, as STDOUT_FILENO really is
  static StatusLine standard_error();   // std::cerr, as STDERR_FILENO really is

  bool is_terminal() const { return traits_.is_terminal; }
  bool unicode() const { return traits_.unicode; }
  int columns() const;

  // Terminal only: replaces the status line with `text` (fitted to columns() by the caller).
  void show(const std::string& text);
  // Erases the status line, so that other output starts on a clean line.
  void clear();
  // Prints `line` and a newline above the status line, which is then drawn again below it.
  void print(const std::string& line);
  // Leaves the status line on screen as an ordinary line; the next output starts below it.
  void keep();
  bool showing() const { return !shown_.empty(); }

 private:
  std::ostream* out_;
  TerminalTraits traits_;
  int fd_;
  std::string shown_;  // the status line on screen now; empty when there is none
};

}  // namespace folio
