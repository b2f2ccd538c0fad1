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
#include <memory>
#include <string>
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

  std::chrono::milliseconds timeout_;
  std::unique_ptr<TcpStore> store_;  // kept for the job: it knows which ranks are gone
  std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 0;
};

}  // namespace folio
