// The Gloo communicator and its rendezvous store, with the ranks as threads of this process
// (each its own Gloo context and TCP connections over 127.0.0.1): every collective of the
// contract on values that differ per rank and per call, against sums computed here; the store's
// set/get, duplicate ranks and which ranks are gone.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "distributed/gloo_communicator.h"
#include "distributed/make_communicator.h"
#include "distributed/tcp_store.h"
#include "distributed/waiting_for_peers.h"

namespace folio {
namespace {

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

LaunchEnvironment environment(int rank, int world_size, int port) {
  LaunchEnvironment env;
  env.launcher = Launcher::kTorchrun;
  env.rank = env.local_rank = rank;
  env.world_size = world_size;
  env.master_address = "127.0.0.1";
  env.master_port = port;
  return env;
}

// Runs body(rank) on world_size threads; returns each thread's failure message ("" if none).
std::vector<std::string> on_ranks(int world_size, const std::function<void(int)>& body) {
  std::vector<std::string> failures(world_size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world_size; ++rank)
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (const std::exception& error) {
        failures[rank] = error.what();
      }
    });
  for (std::thread& thread : threads) thread.join();
  return failures;
}

float gradient_value(size_t i, int rank, int call) {
  return static_cast<float>((i * 13 + static_cast<size_t>(call) * 101) % 257) * 0.5f -
         static_cast<float>(rank) * 3.25f;
}

// A peer gone under a write (waiting_for_peers.h): Gloo's writes to a dead rank's socket raise
// SIGPIPE, whose default action killed a surviving rank too (CI once saw "rank 0 was killed by
// signal 13" where dist_rank_failure wants rank 0 to say whose connection closed). In a child
// process with the handler installed: a write to a socket whose peer has closed, while the rank
// waits in a collective, ends it with exit code 1 and a message naming the collective (and the
// peer, in a job of two ranks); outside a collective SIGPIPE keeps its default action.
struct ChildEnd {
  int status;
  std::string stderr_text;
};
ChildEnd write_to_a_closed_peer(int world_size, bool in_collective) {
  int out[2];
  EXPECT_EQ(::pipe(out), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(out[1], STDERR_FILENO);
    note_rank_for_messages(0);
    end_rank_on_sigpipe_in_collectives(world_size);
    int ends[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, ends) != 0) ::_exit(98);
    ::close(ends[1]);
    const char byte = 'x';
    if (in_collective) {
      const WaitingForPeers waiting("a gradient all-reduce");
      [[maybe_unused]] ssize_t ignored = ::write(ends[0], &byte, 1);
    } else {
      [[maybe_unused]] ssize_t ignored = ::write(ends[0], &byte, 1);
    }
    ::_exit(99);  // survived the write
  }
  ::close(out[1]);
  std::string text;
  char buffer[512];
  for (ssize_t got; (got = ::read(out[0], buffer, sizeof(buffer))) > 0;) text.append(buffer, got);
  ::close(out[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return {status, text};
}

TEST(PeerGoneOnSigpipe, AWriteToAClosedPeerInACollectiveEndsTheRankWithAMessage) {
  const ChildEnd two = write_to_a_closed_peer(2, true);
  ASSERT_TRUE(WIFEXITED(two.status)) << "status " << two.status << ": " << two.stderr_text;
  EXPECT_EQ(WEXITSTATUS(two.status), 1);
  EXPECT_EQ(two.stderr_text,
            "folio: error: rank 0: the connection was closed by rank 1 during a gradient "
            "all-reduce (did it exit, die or hang?)\n");
  const ChildEnd three = write_to_a_closed_peer(3, true);
  ASSERT_TRUE(WIFEXITED(three.status)) << "status " << three.status;
  EXPECT_EQ(WEXITSTATUS(three.status), 1);
  EXPECT_NE(three.stderr_text.find("rank 0: the connection to another rank was closed"),
            std::string::npos)
      << three.stderr_text;
  EXPECT_NE(three.stderr_text.find("during a gradient all-reduce"), std::string::npos);
  const ChildEnd outside = write_to_a_closed_peer(2, false);
  EXPECT_TRUE(WIFSIGNALED(outside.status) && WTERMSIG(outside.status) == SIGPIPE)
      << "status " << outside.status << ": " << outside.stderr_text;
  EXPECT_EQ(outside.stderr_text, "");
}

// Gloo's rendezvous waits in the store's own waits: when the inner mark ends, the outer one is the
// collective again (it had become none, so that a SIGPIPE while the connections were made ended
// the rank by the default action, without a message).
TEST(PeerGoneOnSigpipe, NestedMarksGiveTheOuterOneBack) {
  ASSERT_EQ(collective_being_waited_for(), nullptr);
  {
    const WaitingForPeers outer("the rendezvous");
    {
      const WaitingForPeers inner("a store wait");
      EXPECT_STREQ(collective_being_waited_for(), "a store wait");
    }
    EXPECT_STREQ(collective_being_waited_for(), "the rendezvous");
  }
  EXPECT_EQ(collective_being_waited_for(), nullptr);
}

TEST(GlooCommunicator, EveryCollectiveOnThreeRanks) {
  constexpr int kRanks = 3;
  const int port = free_port();
  const std::vector<std::string> failures = on_ranks(kRanks, [&](int rank) {
    GlooCommunicator gloo(environment(rank, kRanks, port), 30);
    ASSERT_EQ(gloo.rank(), rank);
    // Sums of sizes around and above Gloo's 1 MB segments, different values at every call.
    int call = 0;
    for (size_t n : {size_t{1}, size_t{1000003}, size_t{3 * 262144 + 5}}) {
      ++call;
      std::vector<float> data(n);
      for (size_t i = 0; i < n; ++i) data[i] = gradient_value(i, rank, call);
      gloo.all_reduce_sum_device(data.data(), n);
      for (size_t i = 0; i < n; i += 7919) {
        float expected = 0.0f;
        for (int r = 0; r < kRanks; ++r) expected += gradient_value(i, r, call);
        ASSERT_EQ(data[i], expected) << "element " << i << " of " << n << ", rank " << rank;
      }
    }
    std::vector<float> weights(4099, static_cast<float>(rank + 1));
    if (rank == 0)
      for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<float>(i) * 0.25f;
    gloo.broadcast_device(weights.data(), weights.size());
    for (size_t i = 0; i < weights.size(); ++i)
      ASSERT_EQ(weights[i], static_cast<float>(i) * 0.25f);

    double losses[2] = {1.0 / (rank + 1), 1e12 * rank};
    gloo.all_reduce_sum_host(losses, 2);
    EXPECT_DOUBLE_EQ(losses[0], 1.0 + 0.5 + 1.0 / 3);
    EXPECT_EQ(losses[1], 3e12);
    int64_t flags[2] = {rank == 1 ? 7 : 0, -rank};
    gloo.all_reduce_max_host(flags, 2);
    EXPECT_EQ(flags[0], 7);
    EXPECT_EQ(flags[1], 0);
    char id[16] = {};
    std::snprintf(id, sizeof(id), "from rank %d", rank);
    gloo.broadcast_host(id, sizeof(id));
    EXPECT_STREQ(id, "from rank 0");
    const int32_t mine = 100 + rank;
    int32_t all[kRanks] = {};
    gloo.all_gather_host(&mine, all, sizeof(mine));
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(all[r], 100 + r);
    // Strings of every length through the fixed width: shorter ones come back without their
    // padding, longer ones cut (the checks that ranks agree rely on both).
    const std::string letters(static_cast<size_t>(rank) + 1, static_cast<char>('a' + rank));
    EXPECT_EQ(all_gather_strings(gloo, letters, 2), (std::vector<std::string>{"a", "bb", "cc"}));
    gloo.barrier();
  });
  for (int rank = 0; rank < kRanks; ++rank) EXPECT_EQ(failures[rank], "") << "rank " << rank;
}

// Ranks on unlike devices (device = auto on machines of which only some have a GPU): before any
// collective that only GPU ranks would call, every rank learns it and says which rank differs;
// ranks that agree go on, and the communicator still works after the check.
TEST(GlooCommunicator, RanksOnUnlikeDevicesAreToldBeforeAnythingElse) {
  constexpr int kRanks = 3;
  for (const int gpu_rank : {-1, 1, 0}) {
    const int port = free_port();
    const std::vector<std::string> failures = on_ranks(kRanks, [&](int rank) {
      GlooCommunicator gloo(environment(rank, kRanks, port), 30);
      check_ranks_compute_on_one_kind_of_device(gloo, rank == gpu_rank ? "cuda" : "cpu");
      double one = 1.0;
      gloo.all_reduce_sum_host(&one, 1);
      EXPECT_EQ(one, kRanks);
    });
    for (int rank = 0; rank < kRanks; ++rank) {
      if (gpu_rank < 0) {
        EXPECT_EQ(failures[rank], "") << "rank " << rank;
        continue;
      }
      const std::string expected = gpu_rank == 1 ? "rank 1 computes on cuda and rank 0 on cpu"
                                                 : "rank 1 computes on cpu and rank 0 on cuda";
      EXPECT_EQ(failures[rank].rfind(expected, 0), 0u) << "rank " << rank << ": " << failures[rank];
      EXPECT_NE(failures[rank].find("set device = cpu for every rank"), std::string::npos);
    }
  }
}

// Sums begun while the rank goes on computing (start_sum_device, as the backward pass starts one
// for each block's gradients), run by the communicator's own thread in the order begun: four
// buffers on three ranks, the rank busy writing other memory in between; after finish_sums()
// each holds its sum, the same bits on every rank. A host collective right after a begun sum
// waits for it first (Gloo's context serves one thread at a time).
TEST(GlooCommunicator, SumsBegunWhileTheRankComputes) {
  constexpr int kRanks = 3;
  const int port = free_port();
  std::vector<std::vector<std::vector<float>>> results(kRanks);
  const std::vector<std::string> failures = on_ranks(kRanks, [&](int rank) {
    GlooCommunicator gloo(environment(rank, kRanks, port), 30);
    const std::vector<size_t> sizes = {5, 1000003, 262144, 3};
    std::vector<std::vector<float>> buffers;
    for (size_t b = 0; b < sizes.size(); ++b) buffers.emplace_back(sizes[b]);
    std::vector<float> busy(1 << 20);
    for (size_t b = 0; b < sizes.size(); ++b) {
      for (size_t i = 0; i < sizes[b]; ++i)
        buffers[b][i] = gradient_value(i, rank, static_cast<int>(b) + 10);
      gloo.start_sum_device(buffers[b].data(), sizes[b]);
      for (size_t i = 0; i < busy.size(); ++i) busy[i] += static_cast<float>(i % 7);  // computing
    }
    gloo.finish_sums();
    for (size_t b = 0; b < sizes.size(); ++b)
      for (size_t i = 0; i < sizes[b]; i += 4999) {
        float expected = 0.0f;
        for (int r = 0; r < kRanks; ++r) expected += gradient_value(i, r, static_cast<int>(b) + 10);
        ASSERT_EQ(buffers[b][i], expected) << "buffer " << b << " element " << i;
      }
    results[rank] = buffers;
    std::vector<float> more(1000, static_cast<float>(rank));
    gloo.start_sum_device(more.data(), more.size());
    double loss = 1.0;
    gloo.all_reduce_sum_host(&loss, 1);  // waits for the sum begun before it
    EXPECT_EQ(loss, 3.0);
    EXPECT_EQ(more[999], 3.0f);
    gloo.start_sum_device(more.data(), more.size());
    gloo.finish_sums();
    EXPECT_EQ(more[0], 9.0f);
  });
  for (int rank = 0; rank < kRanks; ++rank) EXPECT_EQ(failures[rank], "") << "rank " << rank;
  for (int rank = 1; rank < kRanks; ++rank) EXPECT_EQ(results[rank], results[0]) << "rank " << rank;
}

TEST(TcpStore, SetGetJoinAndRanksGone) {
  const int port = free_port();
  const auto timeout = std::chrono::milliseconds(5000);
  TcpStore server(std::string("127.0.0.1"), port, true, 0, timeout);
  EXPECT_TRUE(server.join(0));
  {
    TcpStore client("127.0.0.1", port, false, 1, timeout);
    EXPECT_TRUE(client.join(1));
    client.set("address 1", {'a', 'b', '\0', 'c'});
    EXPECT_EQ(server.get("address 1"), (std::vector<char>{'a', 'b', '\0', 'c'}));
    TcpStore impostor("127.0.0.1", port, false, 1, timeout);
    EXPECT_FALSE(impostor.join(1)) << "a second process joined as rank 1";
    EXPECT_TRUE(server.ranks_gone(timeout).empty());
  }  // rank 1's connection closes
  std::vector<int> gone;
  for (int attempt = 0; attempt < 50 && gone.empty(); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gone = server.ranks_gone(timeout);
  }
  EXPECT_EQ(gone, std::vector<int>{1});
}

TEST(TcpStore, WaitingForAKeyEndsAtTheTimeout) {
  const int port = free_port();
  TcpStore store("127.0.0.1", port, true, 0, std::chrono::milliseconds(300));
  try {
    store.wait({"never set"}, std::chrono::milliseconds(300));
    FAIL() << "waited for a key nobody sets without end";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("waited 0.3 s (dist_timeout)"), std::string::npos)
        << error.what();
  }
}

// An address that does not resolve is blamed on where it came from (SageMaker's first host had
// been blamed on MASTER_ADDR).
TEST(GlooCommunicator, AnUnresolvableRendezvousNamesWhereItsAddressCameFrom) {
  LaunchEnvironment env = environment(1, 2, free_port());
  env.master_address = "no-such-host.invalid";
  env.master_address_from = "SM_HOSTS' first host";
  try {
    GlooCommunicator communicator(env, 1.0);
    FAIL() << "no-such-host.invalid resolved";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("'no-such-host.invalid' (SM_HOSTS' first host)"),
              std::string::npos)
        << error.what();
  }
}

// A listener whose backlog is full drops the SYNs: a blocking connect waited for the kernel's SYN
// retries (about 127 s), whatever the timeout.
TEST(TcpStore, ConnectingEndsAtTheTimeoutWhenTheListenerDropsConnections) {
  const int port = free_port();
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 0), 0);
  std::vector<int> fillers;  // connections never accepted, until one is not answered
  bool full = false;
  while (!full && fillers.size() < 16) {
    fillers.push_back(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
    ::connect(fillers.back(), reinterpret_cast<sockaddr*>(&address), sizeof(address));
    pollfd p{fillers.back(), POLLOUT, 0};
    full = ::poll(&p, 1, 300) == 0;
  }
  ASSERT_TRUE(full) << "the listener's backlog never filled";
  auto outcome = std::make_shared<std::promise<std::string>>();
  std::future<std::string> said = outcome->get_future();
  std::thread([outcome, port] {  // detached: a connect that ignores the timeout outlives the test
    try {
      TcpStore client("127.0.0.1", port, false, 1, std::chrono::milliseconds(500));
      outcome->set_value("connected");
    } catch (const Error& error) {
      outcome->set_value(error.what());
    }
  }).detach();
  ASSERT_EQ(said.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "connecting to a listener that drops connections ignored a timeout of 0.5 s";
  EXPECT_NE(said.get().find("rank 1: waited 0.5 s (dist_timeout) for rank 0's rendezvous"),
            std::string::npos);
  for (int fd : fillers) ::close(fd);
  ::close(listener);
}

}  // namespace
}  // namespace folio
