// Collectives through Gloo (Debian's libgloo, PyTorch's own CPU collective library) over TCP,
// for ranks started without MPI: `folio train --nproc`, a torchrun-style environment, SageMaker.
//
// Rendezvous: rank 0 serves a small key-value store at MASTER_ADDR:MASTER_PORT (tcp_store.h);
// each rank joins it as its rank (two processes joining as one rank stop at once), checks that
// rank 0's world size is its own, and posts the address of its Gloo listener: the address of
// this machine that packets to MASTER_ADDR leave from (or GLOO_SOCKET_IFNAME's, as in PyTorch).
// Gloo then connects every pair of ranks.
//
// Sums use Gloo's ring all-reduce (reduce-scatter, then all-gather of the reduced chunks), so
// every rank ends with the same bits. Device buffers are host memory here (the CPU backend;
// make_communicator stages a GPU's buffers through host memory). Each collective gives up after
// dist_timeout; a lost connection or a timeout becomes one folio::Error naming the collective
// and the rank that is gone (the store knows whose connection to it closed).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "distributed/communicator.h"
#include "distributed/launch_environment.h"

namespace gloo {
class Context;
}

namespace folio {

class TcpStore;

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(const LaunchEnvironment& env, double timeout_seconds);
  ~GlooCommunicator() override;

  std::string name() const override { return "gloo"; }
  void all_reduce_sum_device(float* data, size_t n) override;
  void broadcast_device(float* data, size_t n) override;
  // In a thread of the communicator's own, in the order begun: Gloo's sums take a core's time to
  // add and copy, and wait on the network, while the backward pass goes on.
  void start_sum_device(float* data, size_t n) override;
  void finish_sums() override;
  void all_reduce_sum_host(double* data, size_t n) override;
  void all_reduce_max_host(int64_t* data, size_t n) override;
  void broadcast_host(void* data, size_t bytes) override;
  void all_gather_host(const void* mine, void* all, size_t bytes) override;
  void barrier() override;

 private:
  // Runs one collective (a gloo call on `options`, given a tag and the timeout here), turning
  // Gloo's exceptions into a folio::Error.
  template <typename Options, typename Collective>
  void run(const char* what, Options& options, Collective&& collective);
  // "rank R: <what happened> rank P during <what>": the line a rank prints when a peer is gone.
  Error lost_peer(const std::string& gloo_message, const char* what);
  uint32_t next_tag() { return tag_++; }

  // data[i] = sum over ranks of data[i], now (all_reduce_sum_device, and sum_thread_'s sums).
  void sum_gradients(float* data, size_t n);
  // The sums begun by start_sum_device, run one after another by sum_thread_. Every other
  // collective first waits for them (finish_sums), so Gloo's context is never used by two threads
  // at once.
  void run_sums();

  std::chrono::milliseconds timeout_;
  std::unique_ptr<TcpStore> store_;  // kept for the job: it knows which ranks are gone
  std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 0;

  std::mutex sums_mutex_;
  std::condition_variable sums_changed_;
  std::deque<std::pair<float*, size_t>> sums_waiting_;
  bool sum_running_ = false;
  bool stopping_ = false;
  std::exception_ptr sum_error_;  // the first sum that failed; finish_sums() throws it
  std::thread sum_thread_;        // started by the first start_sum_device
};

}  // namespace folio
