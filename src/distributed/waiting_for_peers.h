// Which collective this process is blocked in, if any. When mpirun stops a job because a rank
// died, the surviving ranks are blocked in a collective and get SIGTERM then SIGKILL within a
// second or so; the stop-signal handler (train/stop_signal.cpp) reads this to print, at once,
// what the rank was waiting for.
#pragma once

namespace folio {

// Marks the collective from construction to destruction. They nest: Gloo's rendezvous waits in
// the store's own waits, and when an inner one ends the outer one is the collective again (it
// had been none, so a SIGPIPE while the connections were made killed the rank without a word).
// Where another thread's mark came after this one, that one stays.
class WaitingForPeers {
 public:
  explicit WaitingForPeers(const char* what);  // `what` must be a string literal
  ~WaitingForPeers();
  WaitingForPeers(const WaitingForPeers&) = delete;
  WaitingForPeers& operator=(const WaitingForPeers&) = delete;

 private:
  const char* what_;
  const char* outer_;  // the mark before this one
};

// The collective being waited for, or nullptr. Safe to call from a signal handler.
const char* collective_being_waited_for();

// This process's rank, for the signal handler's message (set by the communicators; -1: none).
void note_rank_for_messages(int rank);
int rank_for_messages();

// Text and a decimal number to stderr with only async-signal-safe calls (for signal handlers).
void write_signal_safe(const char* text);
void write_signal_safe(long long number);

// A peer gone under a write. Gloo writes to its sockets with writev: when its write to a rank that
// has died comes before it reads that the socket closed, SIGPIPE's default action killed this rank
// too ("rank 0 was killed by signal 13"), and holding SIGPIPE back instead leaves Gloo's
// asynchronous write waiting for the timeout (it retries on EPIPE). So while this rank waits in a
// collective, SIGPIPE ends it at once with a message naming the collective (and the peer, when
// the job has two ranks) and exit code 1; outside a collective SIGPIPE keeps its default, so that
// `folio train | head` still ends the run. Installed by the Gloo communicator (world_size > 1).
void end_rank_on_sigpipe_in_collectives(int world_size);

}  // namespace folio
