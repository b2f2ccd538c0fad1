// Where SIGINT, SIGTERM and kLauncherGoneSignal are delivered: on one thread of their own that runs
// no numerical code.
//
// Why: oneDNN's JIT GEMM kernels (Debian 12 ships oneDNN 2.7) point the stack register at a
// workspace on the heap while they run. A signal handled on a thread inside such a kernel has its
// frame pushed there, which corrupts the heap: folio then aborted ("corrupted size vs.
// prev_size") or crashed a moment after a Ctrl-C or a scheduler's SIGTERM, about one stop in
// three during a training step. This is oneDNN issue #4845, fixed upstream (pull request #4855)
// in 2026 (tests/test_signal_thread.cpp shows the hazard with the CPU backend's products).
// Blocking the signals on every thread that computes and receiving them on a quiet one avoids it
// whatever oneDNN version is linked.
#pragma once

#include <signal.h>

#include <string>

namespace folio {

// What a rank that `folio train --nproc` started gets when its launcher dies (PR_SET_PDEATHSIG).
// Not SIGTERM: Linux sends the parent-death signal at every reparenting, once when the launcher's
// forking thread dies and again when its last thread does, and a second SIGTERM means "stop at
// once" (train/stop_signal.h), so a launcher killed outright often lost its ranks' state.
constexpr int kLauncherGoneSignal = SIGUSR2;

// Call first thing in main(), before any thread starts: blocks SIGINT, SIGTERM and
// kLauncherGoneSignal on this thread (and so on every thread it starts later, OpenMP's and
// oneDNN's included) and starts the one thread that receives them. Handlers installed with
// sigaction (train/stop_signal.cpp, distributed/local_ranks.cpp) then run on that thread; with no
// handler, the signal still ends the process as usual.
void receive_stop_signals_on_their_own_thread();

// Whether the calling thread has SIGINT and SIGTERM blocked (for tests).
bool stop_signals_blocked_on_this_thread();

// std::system(command) with SIGINT and SIGTERM deliverable to the command (a child inherits the
// caller's blocked signals, and a download that Ctrl-C cannot stop would be a trap).
int run_shell_command(const std::string& command);

}  // namespace folio
