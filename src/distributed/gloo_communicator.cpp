#include "distributed/gloo_communicator.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include "distributed/tcp_store.h"
#include "distributed/waiting_for_peers.h"

namespace folio {

namespace {

// The address of this machine that the others reach it by: the one its packets to the
// rendezvous leave from (connecting a UDP socket sends nothing, it only picks the route).
// Its errors name where the rendezvous address came from (SM_HOSTS had been blamed on MASTER_ADDR).
std::string local_address_towards(const LaunchEnvironment& env) {
  const std::string& host = env.master_address;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(env.master_port).c_str(), &hints, &found) != 0 ||
      !found)
    throw Error("cannot resolve the rendezvous address '" + host + "' (" + env.master_address_from +
                "): give an IPv4 address or a host name this machine knows");
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  socklen_t length = sizeof(local);
  const bool routed = fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0;
  ::freeaddrinfo(found);
  if (fd >= 0) ::close(fd);
  if (!routed)
    throw Error("no network route to the rendezvous address " + host + " (" +
                env.master_address_from + ")");
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
  return text;
}

std::vector<char> text_bytes(const std::string& text) {
  return {text.begin(), text.end()};
}

// An in-place all-reduce of n values with Gloo's element-wise `reduce`, by its ring algorithm
// (reduce-scatter, then all-gather): each chunk is reduced once, so every rank gets the same bits.
template <typename T>
gloo::AllreduceOptions all_reduce_options(const std::shared_ptr<gloo::Context>& context, T* data,
                                          size_t n,
                                          void (*reduce)(void*, const void*, const void*, size_t)) {
  gloo::AllreduceOptions options(context);
  options.setOutput(data, n);
  options.setReduceFunction(reduce);
  options.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  return options;
}

}  // namespace

GlooCommunicator::GlooCommunicator(const LaunchEnvironment& env, double timeout_seconds)
    : Communicator(env.rank, env.world_size, env.local_rank),
      timeout_(static_cast<int64_t>(timeout_seconds * 1000)) {
  if (world_size() == 1) return;
  const std::string me = "rank " + std::to_string(rank());
  gloo::transport::tcp::attr attr;
  attr.ai_family = AF_INET;
  // Checked with GLOO_SOCKET_IFNAME too: the store's own message cannot say where the address
  // came from.
  const std::string local_address = local_address_towards(env);
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface && *interface)
    attr.iface = interface;
  else
    attr.hostname = local_address;

  store_ =
      std::make_unique<TcpStore>(env.master_address, env.master_port, is_root(), rank(), timeout_);
  if (!store_->join(rank()))
    throw Error(me + ": another process already joined the rendezvous at " + env.master_address +
                ":" + std::to_string(env.master_port) +
                " as this rank (a duplicate RANK, or a stale process of an earlier job?)");
  const std::string world = std::to_string(world_size());
  if (is_root()) store_->set("folio/world size", text_bytes(world));
  const std::vector<char> root_world = store_->get("folio/world size");
  if (std::string(root_world.begin(), root_world.end()) != world)
    throw Error(me + ": rank 0 says the job has " +
                std::string(root_world.begin(), root_world.end()) + " ranks, this rank " + world +
                " (give every rank the same WORLD_SIZE)");
  end_rank_on_sigpipe_in_collectives(world_size());
  try {
    const WaitingForPeers waiting("the rendezvous");
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank(), world_size());
    context->setTimeout(timeout_);
    context->connectFullMesh(*store_, device);
    context_ = context;
  } catch (const std::exception& error) {
    throw Error(me + ": Gloo could not connect the ranks through the rendezvous at " +
                env.master_address + ":" + std::to_string(env.master_port) + ": " + error.what());
  }
}

GlooCommunicator::~GlooCommunicator() {
  if (!sum_thread_.joinable()) return;
  {
    // Sums not yet begun are dropped (this rank is going; its peers see it gone); one under way
    // ends, or gives up after dist_timeout.
    std::lock_guard<std::mutex> lock(sums_mutex_);
    stopping_ = true;
    sums_waiting_.clear();
  }
  sums_changed_.notify_all();
  sum_thread_.join();
}

Error GlooCommunicator::lost_peer(const std::string& gloo_message, const char* what) {
  // Gloo names a peer by a socket address; the store knows which ranks are gone. A dead rank's
  // connections all close at once, but give the store's thread a moment to see its own.
  std::string gone;
  try {
    for (int attempt = 0; attempt < 10 && gone.empty(); ++attempt) {
      if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      for (int r : store_->ranks_gone(std::chrono::seconds(2))) {
        gone += gone.empty() ? "rank " : ", rank ";
        gone += std::to_string(r);
      }
    }
  } catch (const Error&) {
    // The store is rank 0's, so rank 0 has stopped too; it may have been the first to see
    // another rank fail (and named it) while this rank still waited on rank 0 alone.
    gone = "rank 0 (it has stopped, and with it the rendezvous store that knows which rank "
           "failed first: see rank 0's message)";
  }
  const std::string me = "rank " + std::to_string(rank()) + ": ";
  const std::string during = std::string(" during ") + what;
  if (gloo_message.find("Timed out") != std::string::npos) {
    if (gone.empty())
      gone = world_size() == 2 ? "rank " + std::to_string(1 - rank()) : "the other ranks";
    return Error(me + waited_dist_timeout(timeout_.count() / 1000.0) + " for " + gone + during +
                 " (did a rank exit, die or hang?)");
  }
  if (gone.empty()) gone = "a peer";
  if (gloo_message.find("closed by peer") != std::string::npos ||
      gloo_message.find("reset by peer") != std::string::npos)
    return Error(me + "the connection was closed by " + gone + during +
                 " (did it exit, die or hang?)");
  return Error(me + "lost " + gone + during + " (did it exit, die or hang?): " + gloo_message);
}

template <typename Options, typename Collective>
void GlooCommunicator::run(const char* what, Options& options, Collective&& collective) {
  options.setTag(next_tag());
  options.setTimeout(timeout_);
  const WaitingForPeers waiting(what);
  try {
    collective(options);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& error) {
    throw lost_peer(error.what(), what);
  }
}

void GlooCommunicator::sum_gradients(float* data, size_t n) {
  gloo::AllreduceOptions options = all_reduce_options(context_, data, n, &gloo::sum<float>);
  run("a gradient all-reduce", options, [](auto& o) { gloo::allreduce(o); });
}

void GlooCommunicator::all_reduce_sum_device(float* data, size_t n) {
  if (world_size() == 1 || n == 0) return;
  finish_sums();
  sum_gradients(data, n);
}

void GlooCommunicator::start_sum_device(float* data, size_t n) {
  if (world_size() == 1 || n == 0) return;
  {
    std::lock_guard<std::mutex> lock(sums_mutex_);
    sums_waiting_.emplace_back(data, n);
  }
  if (!sum_thread_.joinable()) sum_thread_ = std::thread([this] { run_sums(); });
  sums_changed_.notify_all();
}

void GlooCommunicator::run_sums() {
  std::unique_lock<std::mutex> lock(sums_mutex_);
  for (;;) {
    sums_changed_.wait(lock, [&] { return stopping_ || !sums_waiting_.empty(); });
    if (stopping_) return;
    const auto [data, n] = sums_waiting_.front();
    sums_waiting_.pop_front();
    sum_running_ = true;
    const bool failed_before = sum_error_ != nullptr;
    lock.unlock();
    std::exception_ptr error;
    try {
      // after a failure the rest are not begun: finish_sums() reports it
      if (!failed_before) sum_gradients(data, n);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !sum_error_) sum_error_ = error;
    sum_running_ = false;
    sums_changed_.notify_all();
  }
}

void GlooCommunicator::finish_sums() {
  if (!sum_thread_.joinable()) return;
  std::unique_lock<std::mutex> lock(sums_mutex_);
  sums_changed_.wait(lock, [&] { return sums_waiting_.empty() && !sum_running_; });
  if (sum_error_) {
    const std::exception_ptr error = sum_error_;
    sum_error_ = nullptr;
    std::rethrow_exception(error);
  }
}

void GlooCommunicator::broadcast_device(float* data, size_t n) {
  broadcast_host(data, n * sizeof(float));
}

void GlooCommunicator::all_reduce_sum_host(double* data, size_t n) {
  if (world_size() == 1 || n == 0) return;
  finish_sums();
  gloo::AllreduceOptions options = all_reduce_options(context_, data, n, &gloo::sum<double>);
  run("a loss all-reduce", options, [](auto& o) { gloo::allreduce(o); });
}

void GlooCommunicator::all_reduce_max_host(int64_t* data, size_t n) {
  if (world_size() == 1 || n == 0) return;
  finish_sums();
  gloo::AllreduceOptions options = all_reduce_options(context_, data, n, &gloo::max<int64_t>);
  run("a max all-reduce", options, [](auto& o) { gloo::allreduce(o); });
}

void GlooCommunicator::broadcast_host(void* data, size_t bytes) {
  if (world_size() == 1 || bytes == 0) return;
  finish_sums();
  gloo::BroadcastOptions options(context_);
  options.setOutput(static_cast<uint8_t*>(data), bytes);
  options.setRoot(0);
  run("a broadcast from rank 0", options, [](auto& o) { gloo::broadcast(o); });
}

void GlooCommunicator::all_gather_host(const void* mine, void* all, size_t bytes) {
  if (world_size() == 1) {
    if (mine != all) std::memmove(all, mine, bytes);
    return;
  }
  finish_sums();
  gloo::AllgatherOptions options(context_);
  options.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(mine)), bytes);
  options.setOutput(static_cast<uint8_t*>(all), bytes * world_size());
  run("an all-gather", options, [](auto& o) { gloo::allgather(o); });
}

void GlooCommunicator::barrier() {
  if (world_size() == 1) return;
  finish_sums();
  gloo::BarrierOptions options(context_);
  run("a barrier", options, [](auto& o) { gloo::barrier(o); });
}

}  // namespace folio
