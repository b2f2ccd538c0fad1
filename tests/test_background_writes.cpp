// BackgroundWrites (io/background_writes.h): the trainer's checkpoints and training states are
// written on a thread of their own. A write must run while the caller goes on, say its line once
// it is done, throw its error to the caller exactly once, and never be abandoned half-written.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "core/error.h"
#include "io/background_writes.h"
#include "test_helpers.h"

namespace folio {
namespace {

using testing::error_message;

TEST(BackgroundWrites, RunWhileTheCallerGoesOnAndSayTheirLineWhenDone) {
  BackgroundWrites writes;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> wrote{false};
  writes.start(
      [released, &wrote] {
        released.wait();  // the caller's thread must get past start() and poll() meanwhile
        wrote = true;
      },
      "saved it");
  EXPECT_TRUE(writes.in_flight());
  EXPECT_EQ(writes.poll(), "");  // not done, and poll() does not wait
  EXPECT_FALSE(wrote);
  release.set_value();
  EXPECT_EQ(writes.finish(), "saved it");
  EXPECT_TRUE(wrote);
  EXPECT_FALSE(writes.in_flight());
  EXPECT_EQ(writes.finish(), "");  // said once
  EXPECT_EQ(writes.poll(), "");
}

TEST(BackgroundWrites, PollSaysTheLineOfAFinishedWriteWithoutWaiting) {
  BackgroundWrites writes;
  writes.start([] {}, "done");
  std::string line;
  for (int tries = 0; tries < 1000 && line.empty(); ++tries) {
    line = writes.poll();
    if (line.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(line, "done");
  EXPECT_FALSE(writes.in_flight());
}

TEST(BackgroundWrites, AFailedWriteThrowsItsErrorOnceAndTheNextWriteRuns) {
  BackgroundWrites writes;
  writes.start([] { throw Error("writing run/ckpt.safetensors: No space left on device"); },
               "never said");
  EXPECT_EQ(error_message([&] { writes.finish(); }),
            "writing run/ckpt.safetensors: No space left on device");
  EXPECT_FALSE(writes.in_flight());
  EXPECT_EQ(writes.finish(), "");
  writes.start([] {}, "the next one");
  EXPECT_EQ(writes.finish(), "the next one");
}

TEST(BackgroundWrites, PollThrowsTheErrorOfAWriteThatFailed) {
  BackgroundWrites writes;
  writes.start([] { throw Error("disk full"); });
  std::string message;
  for (int tries = 0; tries < 1000 && message.empty(); ++tries) {
    message = error_message([&] { writes.poll(); });
    if (message.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(message, "disk full");
  EXPECT_FALSE(writes.in_flight());
}

TEST(BackgroundWrites, OneAtATime) {
  BackgroundWrites writes;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  writes.start([released] { released.wait(); });
  EXPECT_NE(error_message([&] { writes.start([] {}); }).find("before the one in flight"),
            std::string::npos);
  release.set_value();
  writes.finish();
}

TEST(BackgroundWrites, DestroyingTheWriterWaitsForItsWrite) {
  std::atomic<bool> wrote{false};
  {
    BackgroundWrites writes;
    writes.start([&wrote] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      wrote = true;
    });
  }
  EXPECT_TRUE(wrote);
}

}  // namespace
}  // namespace folio
