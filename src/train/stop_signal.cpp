#include "train/stop_signal.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

#include "distributed/waiting_for_peers.h"

namespace folio {

namespace {

std::atomic<int> signals_seen{0};

void write_text(const char* text) {
  size_t length = 0;
  while (text[length] != '\0') ++length;
  [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, text, length);
}

void on_stop_signal(int signal_number) {
  if (signals_seen.fetch_add(1) == 0) {
    write_text(
        "\nfolio: stopping after the current step to save the training state "
        "(signal again to stop at once)\n");
    // Blocked on the other ranks: if one of them died, the launcher is stopping the job and
    // this is the last chance to say so.
    if (const char* what = collective_being_waited_for()) {
      char rank_text[16] = "?";
      int rank = rank_for_messages(), length = 0;
      char digits[16];
      if (rank >= 0) {
        do digits[length++] = static_cast<char>('0' + rank % 10), rank /= 10;
        while (rank > 0);
        for (int i = 0; i < length; ++i) rank_text[i] = digits[length - 1 - i];
        rank_text[length] = '\0';
      }
      write_text("folio: rank ");
      write_text(rank_text);
      write_text(": the signal came while waiting for the other ranks in ");
      write_text(what);
      write_text(" (if a rank died, the launcher is stopping the job)\n");
    }
    return;
  }
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool stop_requested() {
  return signals_seen.load() > 0;
}

}  // namespace folio
