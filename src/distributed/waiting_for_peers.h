// Which collective this process is blocked in, if any. When mpirun stops a job because a rank
// died, the surviving ranks are blocked in a collective and get SIGTERM then SIGKILL within a
// second or so; the stop-signal handler (train/stop_signal.cpp) reads this to print, at once,
// what the rank was waiting for.
#pragma once

namespace folio {

class WaitingForPeers {
 public:
  explicit WaitingForPeers(const char* what);  // `what` must be a string literal
  ~WaitingForPeers();
  WaitingForPeers(const WaitingForPeers&) = delete;
  WaitingForPeers& operator=(const WaitingForPeers&) = delete;
};

// The collective being waited for, or nullptr. Safe to call from a signal handler.
const char* collective_being_waited_for();

// This process's rank, for the signal handler's message (set by the communicators; -1: none).
void note_rank_for_messages(int rank);
int rank_for_messages();

}  // namespace folio
