// Device collectives between GPUs through NCCL, on the CUDA backend's own stream, so they queue
// behind the backward pass without a host wait. NCCL takes device pointers only: the host calls
// (stop flags, loss sums, checksums) go through the communicator that started the job (Gloo or
// MPI), which also carries NCCL's unique id from rank 0 to the others and keeps the timeouts of
// the host collectives. A device collective that a dead or hung peer never joins would keep the
// GPU, and the rank's next wait for it, for ever: a watchdog (collective_watchdog.h) ends the
// rank after dist_timeout, or at once when NCCL reports a broken connection.
//
// NCCL wants one GPU per rank: when ranks share a GPU (two ranks on one card, as the tests do on a
// one-GPU machine) make_communicator stages the device buffers through host memory instead.
#pragma once

#include <memory>

#include "distributed/collective_watchdog.h"
#include "distributed/communicator.h"

namespace folio {

class NcclCommunicator final : public Communicator {
 public:
  // `bootstrap` starts the NCCL communicator and serves the host collectives; `stream` is the
  // backend's cudaStream_t; `timeout_seconds` (dist_timeout) bounds a device collective's wait.
  NcclCommunicator(std::unique_ptr<Communicator> bootstrap, void* stream, double timeout_seconds);
  ~NcclCommunicator() override;

  std::string name() const override { return "nccl (host values over " + bootstrap_->name() + ")"; }
  void all_reduce_sum_device(float* data, size_t n) override;
  void broadcast_device(float* data, size_t n) override;
  // On a stream of the communicator's own, each after what the backend's stream has queued so far
  // (the block's gradients), so that the sums run while the backend's stream computes the blocks
  // below; finish_sums() makes the backend's stream wait for them.
  void start_sum_device(float* data, size_t n) override;
  void finish_sums() override;
  void all_reduce_sum_host(double* data, size_t n) override {
    bootstrap_->all_reduce_sum_host(data, n);
  }
  void all_reduce_max_host(int64_t* data, size_t n) override {
    bootstrap_->all_reduce_max_host(data, n);
  }
  void broadcast_host(void* data, size_t bytes) override {
    bootstrap_->broadcast_host(data, bytes);
  }
  void all_gather_host(const void* mine, void* all, size_t bytes) override {
    bootstrap_->all_gather_host(mine, all, bytes);
  }
  void barrier() override { bootstrap_->barrier(); }

 private:
  std::unique_ptr<Communicator> bootstrap_;
  void* stream_;
  void* comm_ = nullptr;  // ncclComm_t
  // start_sum_device's stream, and the events that order it after the backend's and back
  // (cudaStream_t, cudaEvent_t; made by the first start_sum_device)
  void* sum_stream_ = nullptr;
  void* gradients_ready_ = nullptr;
  void* sums_done_ = nullptr;
  bool sums_pending_ = false;
  // With more than one rank: the watchdog, and the stream and event by which it hears that a
  // collective is done (cudaStream_t, cudaEvent_t)
  std::unique_ptr<CollectiveWatchdog> watchdog_;
  void* watch_stream_ = nullptr;
  void* collective_queued_ = nullptr;
  void watch(void* stream, const char* what);
};

// Whether every rank of `host` has a GPU of its own (NCCL refuses two ranks on one GPU): compares
// the ranks' PCI bus ids. A collective: every rank calls it.
bool every_rank_has_its_own_gpu(Communicator& host);

}  // namespace folio
