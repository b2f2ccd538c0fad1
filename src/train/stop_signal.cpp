#include "train/stop_signal.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

namespace folio {

namespace {

std::atomic<int> signals_seen{0};

void on_stop_signal(int signal_number) {
  if (signals_seen.fetch_add(1) == 0) {
    const char message[] =
        "\nfolio: stopping after the current step to save the training state "
        "(signal again to stop at once)\n";
    [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, message, sizeof(message) - 1);
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

bool stop_requested() { return signals_seen.load() > 0; }

}  // namespace folio
