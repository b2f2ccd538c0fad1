// Checkpoints and training states written on a thread of their own while training goes on.
//
// Why: a write is a serialisation, a SHA-256 and an fsync of the whole file, and the training loop
// used to wait for it. On a GPU that idles the device: a GPT-2 124M checkpoint is 500 MB and its
// training state 1.5 GB (on the 2-core build machine, 1.0 s for a 341 MB checkpoint and 2.7 s for
// its 1 GB state), and the seed's run saves its best model at up to 51 evaluations.
//
// The caller copies what is written to the host first (the weights at that step), so the write
// reads nothing that training changes. One write at a time, each finish()ed before the next
// starts: at most one host copy is in flight beside the model, and files are written in order.
// A write that failed throws its error (the one line the synchronous write threw) from the next
// start(), poll() or finish(): the run then stops as it did, and the file before stays whole,
// since every file is written to a temporary name and renamed over the old one.
#pragma once

#include <functional>
#include <future>
#include <string>

namespace folio {

class BackgroundWrites {
 public:
  BackgroundWrites() = default;
  BackgroundWrites(const BackgroundWrites&) = delete;
  BackgroundWrites& operator=(const BackgroundWrites&) = delete;
  // Waits for the write in flight; its error, if any, is dropped (an error being thrown already
  // is what destroys a run's writer early).
  ~BackgroundWrites();

  // Starts `write`; `done_line` is what poll() or finish() returns once it has succeeded ("" for
  // nothing to say). The write before must be finish()ed first (its line said, its error thrown).
  void start(std::function<void()> write, std::string done_line = "");
  // The done_line of a write that has finished since the last call, or "" when none has (or it
  // had nothing to say); throws the error of one that failed. Never waits.
  std::string poll();
  // Waits for the write in flight, then as poll().
  std::string finish();
  bool in_flight() const { return in_flight_.valid(); }

 private:
  std::string collect();  // in_flight_ is ready (or waited for): its line, or its error

  std::future<void> in_flight_;
  std::string done_line_;
};

}  // namespace folio
