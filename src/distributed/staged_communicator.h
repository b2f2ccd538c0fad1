// Device collectives for a GPU backend whose ranks cannot use NCCL (built without it, or ranks
// sharing one GPU): each device buffer is copied to host memory, summed or broadcast there by the
// launcher's communicator (Gloo or MPI), and copied back. Host collectives pass straight through.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "distributed/communicator.h"

namespace folio {

class StagedCommunicator final : public Communicator {
 public:
  StagedCommunicator(std::unique_ptr<Communicator> host, Backend& backend)
      : Communicator(Wraps{*host}), host_(std::move(host)), backend_(backend) {}

  std::string name() const override { return host_->name() + " (GPU buffers through host memory)"; }
  void all_reduce_sum_device(float* data, size_t n) override;
  void broadcast_device(float* data, size_t n) override;
  void all_reduce_sum_host(double* data, size_t n) override { host_->all_reduce_sum_host(data, n); }
  void all_reduce_max_host(int64_t* data, size_t n) override {
    host_->all_reduce_max_host(data, n);
  }
  void broadcast_host(void* data, size_t bytes) override { host_->broadcast_host(data, bytes); }
  void all_gather_host(const void* mine, void* all, size_t bytes) override {
    host_->all_gather_host(mine, all, bytes);
  }
  void barrier() override { host_->barrier(); }

 private:
  std::unique_ptr<Communicator> host_;  // its "device" buffers are host memory
  Backend& backend_;
  std::vector<float> staging_;
};

}  // namespace folio
