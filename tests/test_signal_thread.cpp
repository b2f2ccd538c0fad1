// Stop signals arrive on a thread of their own (core/signal_thread.h), never on a thread inside a
// oneDNN GEMM, whose JIT kernels point the stack register at the heap (oneDNN issue #4845): a
// handler run there pushes its frame onto the heap and corrupts it. Without the arrangement this
// test's process aborts ("corrupted size vs. prev_size") or crashes within a few hundred
// signals on AVX-512 and AVX2 CPUs alike. An executable of its own: it changes the process's
// signal mask and handlers.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "core/signal_thread.h"

namespace {

std::atomic<int> handled{0};
std::atomic<bool> handled_on_main_thread{false};
pthread_t main_thread;

void count_signal(int) {
  handled.fetch_add(1);
  if (pthread_equal(pthread_self(), main_thread)) handled_on_main_thread.store(true);
}

TEST(StopSignals, NeverInterruptAThreadThatComputes) {
  main_thread = pthread_self();
  folio::receive_stop_signals_on_their_own_thread();
  struct sigaction action {};
  action.sa_handler = count_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ASSERT_EQ(sigaction(SIGINT, &action, nullptr), 0);
  ASSERT_TRUE(folio::stop_signals_blocked_on_this_thread());

  // A linear layer of the seed's model (B*T = 2048 rows, 384 -> 1536), forward and backward, on
  // the CPU backend's oneDNN products with two threads, while SIGINTs arrive every millisecond.
  const int N = 2048, IC = 384, OC = 1536;
  std::unique_ptr<folio::Backend> backend = folio::make_backend("cpu", 2);
  std::vector<float> inp(size_t(N) * IC), weight(size_t(OC) * IC), out(size_t(N) * OC),
      dinp(inp.size()), dweight(weight.size()), first_out;
  for (size_t i = 0; i < inp.size(); ++i) inp[i] = float(i % 97) / 97.0f - 0.5f;
  for (size_t i = 0; i < weight.size(); ++i) weight[i] = float(i % 89) / 890.0f - 0.05f;

  std::atomic<bool> computing{true};
  std::thread sender([&] {
    while (computing.load()) {
      ::kill(::getpid(), SIGINT);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  int rounds = 0;
  bool same_every_round = true;
  while (std::chrono::steady_clock::now() < end) {
    auto churn = std::make_unique<std::vector<char>>(1000 + rounds);  // keep malloc busy
    backend->matmul_forward(out.data(), inp.data(), weight.data(), nullptr, N, IC, OC);
    backend->matmul_backward(dinp.data(), dweight.data(), nullptr, out.data(), inp.data(),
                             weight.data(), N, IC, OC, folio::GradientUpdate::kWrite);
    if (first_out.empty()) first_out = out;
    same_every_round = same_every_round && out == first_out;
    ++rounds;
  }
  computing.store(false);
  sender.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the last signals land

  EXPECT_GT(handled.load(), 100) << "the signals were not received at all";
  EXPECT_FALSE(handled_on_main_thread.load()) << "a handler ran on the computing thread";
  EXPECT_TRUE(same_every_round) << "a product changed while signals arrived";
  EXPECT_GT(rounds, 2);
  // The heap is still whole: a large allocation and release after all of it.
  std::vector<float> after(size_t(1) << 22, 1.0f);
  EXPECT_EQ(after.back(), 1.0f);
}

TEST(StopSignals, ShellCommandsGetThemUnblocked) {
  folio::receive_stop_signals_on_their_own_thread();
  // The child's blocked set, as the kernel reports it (SigBlk, hexadecimal; SIGINT is bit 1,
  // SIGTERM bit 14): a download it started could not be stopped with Ctrl-C otherwise.
  const std::string path = ::testing::TempDir() + "/sigblk.txt";
  ASSERT_EQ(folio::run_shell_command("grep SigBlk /proc/self/status > '" + path + "'"), 0);
  FILE* file = std::fopen(path.c_str(), "r");
  ASSERT_NE(file, nullptr);
  char line[128] = {};
  ASSERT_NE(std::fgets(line, sizeof(line), file), nullptr);
  std::fclose(file);
  const unsigned long long blocked = std::strtoull(std::strchr(line, ':') + 1, nullptr, 16);
  EXPECT_EQ(blocked & ((1ull << (SIGINT - 1)) | (1ull << (SIGTERM - 1))), 0ull) << line;
  EXPECT_TRUE(folio::stop_signals_blocked_on_this_thread()) << "the caller's mask came back";
}

}  // namespace
