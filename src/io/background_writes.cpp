#include "io/background_writes.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <utility>

#include "core/error.h"

namespace folio {

BackgroundWrites::~BackgroundWrites() {
  if (!in_flight_.valid()) return;
  try {
    in_flight_.get();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "folio: a file written while the run stopped: %s\n", error.what());
  } catch (...) {
  }
}

void BackgroundWrites::start(std::function<void()> write, std::string done_line) {
  if (in_flight_.valid())
    throw Error("internal: a background write started before the one in flight was finished");
  done_line_ = std::move(done_line);
  // std::launch::async: a thread of its own now, never deferred to the next get(). It inherits
  // the caller's blocked stop signals (core/signal_thread.h).
  in_flight_ = std::async(std::launch::async, std::move(write));
}

std::string BackgroundWrites::poll() {
  if (!in_flight_.valid() ||
      in_flight_.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return "";
  return collect();
}

std::string BackgroundWrites::finish() {
  if (!in_flight_.valid()) return "";
  return collect();
}

std::string BackgroundWrites::collect() {
  std::future<void> finished = std::move(in_flight_);  // no longer in flight, even if it threw
  finished.get();
  return std::exchange(done_line_, std::string());
}

}  // namespace folio
