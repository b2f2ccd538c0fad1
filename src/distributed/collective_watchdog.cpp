#include "distributed/collective_watchdog.h"

#include "distributed/communicator.h"

namespace folio {

CollectiveWatchdog::CollectiveWatchdog(double timeout_seconds, Hooks hooks,
                                       std::chrono::milliseconds poll)
    : timeout_(timeout_seconds), hooks_(std::move(hooks)), poll_(poll) {
  thread_ = std::thread([this] { watch(); });
}

CollectiveWatchdog::~CollectiveWatchdog() { stop(); }

void CollectiveWatchdog::stop() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CollectiveWatchdog::queued(const char* what) {
  const std::lock_guard<std::mutex> lock(mutex_);
  pending_.push_back({what, std::chrono::steady_clock::now()});
}

void CollectiveWatchdog::done() {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (!pending_.empty()) pending_.pop_front();
}

size_t CollectiveWatchdog::pending() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return pending_.size();
}

void CollectiveWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, poll_, [this] { return stopping_; });
    if (stopping_ || pending_.empty()) continue;
    const Queued oldest = pending_.front();
    // The hooks may take their time (the library's query) or never return (give_up exits):
    // not under the lock, which the stream's done() needs.
    lock.unlock();
    std::string message;
    if (const std::string error = hooks_.library_error ? hooks_.library_error() : "";
        !error.empty()) {
      message = error + " during " + oldest.what + ": a rank died or its connection broke";
    } else if (std::chrono::steady_clock::now() - oldest.since > timeout_) {
      message = waited_dist_timeout(timeout_.count()) + " for the other ranks during " +
                oldest.what + ": a rank died or hangs";
    }
    if (!message.empty()) {
      hooks_.give_up(message);
      return;  // once
    }
    lock.lock();
  }
}

}  // namespace folio
