// Gradient sums between GPUs through NCCL, on the CUDA backend's own stream, so they queue behind
// the backward pass without a host wait. Everything small and on the host (stop flags, loss sums,
// checksums, the initial weights' broadcast) still goes through the communicator that started the
// job (MPI or TCP), which also carries NCCL's unique id from rank 0 to the others and keeps the
// timeouts: a dead peer shows up at the next of those collectives, at the latest each step.
//
// NCCL wants one GPU per rank: when ranks share a GPU (two ranks on one card, as the tests do on a
// one-GPU machine) make_communicator keeps the MPI/TCP communicator, through host memory.
#pragma once

#include <memory>

#include "distributed/communicator.h"

namespace folio {

class Backend;

class NcclCommunicator final : public Communicator {
 public:
  // `bootstrap` starts the NCCL communicator and serves the host collectives; `stream` is the
  // backend's cudaStream_t.
  NcclCommunicator(std::unique_ptr<Communicator> bootstrap, void* stream);
  ~NcclCommunicator() override;

  std::string name() const override { return "nccl (bootstrap over " + bootstrap_->name() + ")"; }
  bool reduces_device_memory() const override { return true; }
  void all_reduce_sum(float* data, size_t n) override;  // device memory
  void all_reduce_max(int64_t* data, size_t n) override { bootstrap_->all_reduce_max(data, n); }
  void broadcast(void* data, size_t bytes) override { bootstrap_->broadcast(data, bytes); }
  void all_gather(const void* mine, void* all, size_t bytes) override {
    bootstrap_->all_gather(mine, all, bytes);
  }
  void barrier() override { bootstrap_->barrier(); }

 private:
  std::unique_ptr<Communicator> bootstrap_;
  void* stream_;
  void* comm_ = nullptr;  // ncclComm_t
};

// The NCCL communicator when every rank has a GPU of its own (also for a job of one rank), else
// `bootstrap` itself.
std::unique_ptr<Communicator> maybe_nccl(std::unique_ptr<Communicator> bootstrap, void* stream);

}  // namespace folio
