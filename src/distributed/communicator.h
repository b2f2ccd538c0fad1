// How ranks talk: the collectives data-parallel training needs, behind one interface with
// local (one process), TCP (torchrun-style environment, SageMaker, `folio train --nproc`), MPI
// (mpirun, srun) and, on GPUs, NCCL implementations. The trainer never asks which one it has.
//
// Every collective is called by every rank in the same order. A rank that waits longer than the
// timeout for the others (one died or hangs) throws folio::Error saying which rank and what it
// was waiting for, so no job hangs forever.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace folio {

class Communicator {
 public:
  Communicator(int rank, int world_size, int local_rank);
  virtual ~Communicator() = default;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  bool is_root() const { return rank_ == 0; }
  virtual std::string name() const = 0;
  // Whether all_reduce_sum takes device memory of a GPU backend (NCCL); otherwise host memory.
  virtual bool reduces_device_memory() const { return false; }

  // data[i] = sum over ranks of data[i], the same bits on every rank.
  virtual void all_reduce_sum(float* data, size_t n) = 0;
  // data[i] = max over ranks of data[i] (stop flags, agreement checks).
  virtual void all_reduce_max(int64_t* data, size_t n) = 0;
  // Rank 0's `bytes` bytes to every rank.
  virtual void broadcast(void* data, size_t bytes) = 0;
  // Every rank's `bytes` bytes, in rank order, into `all` (world_size * bytes) on every rank.
  virtual void all_gather(const void* mine, void* all, size_t bytes) = 0;
  virtual void barrier() = 0;

 private:
  int rank_, world_size_, local_rank_;
};

// One process: collectives are no-ops (a sum over one rank is the value itself).
class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator() : Communicator(0, 1, 0) {}
  std::string name() const override { return "local"; }
  void all_reduce_sum(float*, size_t) override {}
  void all_reduce_max(int64_t*, size_t) override {}
  void broadcast(void*, size_t) override {}
  void all_gather(const void* mine, void* all, size_t bytes) override;
  void barrier() override {}
};

}  // namespace folio
