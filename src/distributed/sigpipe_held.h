// SIGPIPE held back on the calling thread for a scope: a write to a socket whose peer has gone then
// fails with EPIPE instead of killing the process.
//
// Gloo writes to its TCP connections with writev, which raises SIGPIPE when the other rank has
// died; the default action kills this rank too ("rank 0 was killed by signal 13") before Gloo can
// throw and the communicator name the rank that left. PyTorch's ranks never meet it (Python
// ignores SIGPIPE). folio keeps the default for its own output, so that `folio train | head`
// still ends the run, and holds SIGPIPE back only while Gloo runs: the connecting (whose loop
// thread, started then, inherits the blocked mask and keeps it) and each collective. A SIGPIPE
// left pending by the scope is taken before the thread's mask is restored, so it is never
// delivered late.
#pragma once

#include <pthread.h>

#include <csignal>
#include <ctime>

namespace folio {

class SigpipeHeld {
 public:
  SigpipeHeld() { pthread_sigmask(SIG_BLOCK, &only_sigpipe(), &previous_); }
  ~SigpipeHeld() {
    if (!sigismember(&previous_, SIGPIPE)) {  // the outermost hold takes what is pending
      sigset_t pending;
      sigpending(&pending);
      const timespec now{0, 0};
      if (sigismember(&pending, SIGPIPE)) sigtimedwait(&only_sigpipe(), nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  SigpipeHeld(const SigpipeHeld&) = delete;
  SigpipeHeld& operator=(const SigpipeHeld&) = delete;

 private:
  static const sigset_t& only_sigpipe() {
    static const sigset_t set = [] {
      sigset_t s;
      sigemptyset(&s);
      sigaddset(&s, SIGPIPE);
      return s;
    }();
    return set;
  }
  sigset_t previous_;
};

}  // namespace folio
