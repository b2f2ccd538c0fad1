// A gradient sum that NCCL runs is waited for on the GPU, not in a host call that could give up:
// when a peer dies or hangs, the sum's kernel spins, and this rank blocks for ever in its next
// wait for the stream (a loss read, a checkpoint copy), where Gloo and MPI give up after
// dist_timeout. NCCL leaves the watching to the application (ncclCommGetAsyncError, then abort),
// as PyTorch's ProcessGroupNCCL does with a watchdog thread. This is folio's: a thread that wakes
// every `poll` and ends the rank when the oldest collective queued and not yet done has waited
// longer than the timeout, or at once when the library reports an error of its own.
//
// It knows nothing of CUDA, so the CPU tests check it: the communicator calls queued() as it
// queues a collective, and done() from a host function that the stream runs once that collective
// has finished (cudaLaunchHostFunc), so in the same order.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace folio {

class CollectiveWatchdog {
 public:
  struct Hooks {
    // A failure the library saw on its own (a peer's connection closed), "" when none; asked at
    // every poll while a collective is pending.
    std::function<std::string()> library_error;
    // Ends the rank with `message` (the communicator prints it and exits with code 1; a test
    // notes it). Called at most once, on the watchdog's thread.
    std::function<void(const std::string& message)> give_up;
  };

  CollectiveWatchdog(double timeout_seconds, Hooks hooks,
                     std::chrono::milliseconds poll = std::chrono::milliseconds(100));
  // Stops the thread without giving up. Whoever queued collectives must see them done (or make
  // sure done() is never called again) before this object goes.
  ~CollectiveWatchdog();
  // Stops the thread (at once, without giving up) and keeps the object, for a done() still to
  // come from a stream after the communicator has gone. Idempotent.
  void stop();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // A collective was queued now; `what` is a string literal ("the gradient sums").
  void queued(const char* what);
  // The oldest collective queued has finished. Safe from any thread (a CUDA host function).
  void done();
  // Collectives queued and not yet done.
  size_t pending() const;

 private:
  struct Queued {
    const char* what;
    std::chrono::steady_clock::time_point since;
  };
  void watch();

  const std::chrono::duration<double> timeout_;
  const Hooks hooks_;
  const std::chrono::milliseconds poll_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Queued> pending_;
  bool stopping_ = false;
  std::thread thread_;  // last: it starts once the members above exist
};

}  // namespace folio
