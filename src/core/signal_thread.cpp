#include "core/signal_thread.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

namespace folio {

namespace {

sigset_t stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, kLauncherGoneSignal);
  return signals;
}

}  // namespace

void receive_stop_signals_on_their_own_thread() {
  const sigset_t signals = stop_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A process-directed signal goes to a thread that does not block it: only this one. It sleeps
  // in pause(), which returns after each handler has run.
  std::thread([signals] {
    pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
    for (;;) ::pause();
  }).detach();
}

bool stop_signals_blocked_on_this_thread() {
  sigset_t current;
  pthread_sigmask(SIG_BLOCK, nullptr, &current);
  return sigismember(&current, SIGINT) == 1 && sigismember(&current, SIGTERM) == 1;
}

int run_shell_command(const std::string& command) {
  // std::system gives the child this thread's signal mask, and ignores SIGINT in this process
  // while the child runs (so a Ctrl-C stops the command and the caller sees it fail).
  const sigset_t signals = stop_signals();
  sigset_t previous;
  pthread_sigmask(SIG_UNBLOCK, &signals, &previous);
  const int status = std::system(command.c_str());
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return status;
}

}  // namespace folio
