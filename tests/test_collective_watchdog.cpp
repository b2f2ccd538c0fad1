// The watchdog of device collectives (distributed/collective_watchdog.h), which ends a GPU rank
// whose NCCL sum a dead or hung peer never joins: here with a clock of tenths of seconds and
// hooks that note what it did, as NCCL's communicator would call it (queued as a collective is
// queued, done from the stream's host function).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/collective_watchdog.h"

namespace folio {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// What the watchdog did, as its hooks saw it.
struct Watched {
  std::mutex mutex;
  std::vector<std::string> messages;  // give_up's
  Clock::time_point gave_up_at;
  std::string library_error;  // what library_error() answers
  std::atomic<int> library_asked{0};

  CollectiveWatchdog::Hooks hooks() {
    CollectiveWatchdog::Hooks hooks;
    hooks.library_error = [this] {
      ++library_asked;
      const std::lock_guard<std::mutex> lock(mutex);
      return library_error;
    };
    hooks.give_up = [this](const std::string& message) {
      const std::lock_guard<std::mutex> lock(mutex);
      messages.push_back(message);
      gave_up_at = Clock::now();
    };
    return hooks;
  }
  std::vector<std::string> given_up() {
    const std::lock_guard<std::mutex> lock(mutex);
    return messages;
  }
  // Waits up to `limit` for give_up.
  bool wait_for_give_up(std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit;
    while (Clock::now() < end) {
      if (!given_up().empty()) return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }
};

TEST(CollectiveWatchdog, CollectivesDoneInTimeEndNothing) {
  Watched watched;
  {
    CollectiveWatchdog watchdog(1.0, watched.hooks(), 10ms);
    for (int step = 0; step < 60; ++step) {
      watchdog.queued("the gradient sums");
      std::this_thread::sleep_for(20ms);  // 1.2 s in all: longer than the timeout, each in time
      watchdog.done();
    }
    EXPECT_EQ(watchdog.pending(), 0u);
    std::this_thread::sleep_for(1100ms);  // nothing pending: nothing to time out
  }
  EXPECT_TRUE(watched.given_up().empty()) << watched.given_up().front();
}

TEST(CollectiveWatchdog, ACollectiveNeverDoneEndsTheRankOnceAfterTheTimeout) {
  Watched watched;
  CollectiveWatchdog watchdog(0.3, watched.hooks(), 10ms);
  const Clock::time_point queued_at = Clock::now();
  watchdog.queued("the gradient sums");
  ASSERT_TRUE(watched.wait_for_give_up(10000ms)) << "no give_up within 10 s";
  EXPECT_GE(watched.gave_up_at - queued_at, 300ms) << "gave up before dist_timeout";
  std::this_thread::sleep_for(100ms);
  const std::vector<std::string> messages = watched.given_up();
  ASSERT_EQ(messages.size(), 1u) << "give_up is called once";
  EXPECT_EQ(messages[0],
            "waited 0.3 s (dist_timeout) for the other ranks during the gradient sums: a rank "
            "died or hangs");
  EXPECT_GT(watched.library_asked, 0) << "the library's own errors are asked for while waiting";
}

TEST(CollectiveWatchdog, TheOldestCollectiveNotDoneIsTheOneTimed) {
  Watched watched;
  CollectiveWatchdog watchdog(0.3, watched.hooks(), 10ms);
  watchdog.queued("a gradient all-reduce");
  std::this_thread::sleep_for(200ms);
  const Clock::time_point second_at = Clock::now();
  watchdog.queued("the broadcast of rank 0's weights");
  watchdog.done();  // the first; the broadcast waits on, timed from when it was queued
  ASSERT_TRUE(watched.wait_for_give_up(10000ms));
  EXPECT_GE(watched.gave_up_at - second_at, 300ms);
  EXPECT_NE(watched.given_up()[0].find("during the broadcast of rank 0's weights"),
            std::string::npos)
      << watched.given_up()[0];
}

TEST(CollectiveWatchdog, AnErrorTheLibrarySawEndsTheRankAtOnce) {
  Watched watched;
  watched.library_error = "NCCL failed (remote process exited or there was a network error)";
  CollectiveWatchdog watchdog(300, watched.hooks(), 10ms);
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(watched.given_up().empty()) << "nothing pending: the rank is not in a collective";
  const Clock::time_point queued_at = Clock::now();
  watchdog.queued("a gradient all-reduce");
  ASSERT_TRUE(watched.wait_for_give_up(10000ms));
  EXPECT_LT(watched.gave_up_at - queued_at, 10s) << "it did not wait for dist_timeout";
  EXPECT_EQ(watched.given_up()[0],
            "NCCL failed (remote process exited or there was a network error) during a gradient "
            "all-reduce: a rank died or its connection broke");
}

// A communicator that ends after an error stops the watchdog (it must neither ask NCCL about a
// communicator going away nor end the rank) and keeps it for a host function still queued.
TEST(CollectiveWatchdog, StoppedItAsksNothingAndGivesUpNoMore) {
  Watched watched;
  CollectiveWatchdog watchdog(0.2, watched.hooks(), 10ms);
  watchdog.queued("the gradient sums");
  watchdog.stop();
  const int asked = watched.library_asked;
  std::this_thread::sleep_for(400ms);
  EXPECT_TRUE(watched.given_up().empty());
  EXPECT_EQ(watched.library_asked, asked);
  watchdog.done();  // the stream's host function, late
  EXPECT_EQ(watchdog.pending(), 0u);
  watchdog.stop();  // again: nothing
}

}  // namespace
}  // namespace folio
