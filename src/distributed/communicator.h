// How ranks talk: the collectives data-parallel training needs, behind one interface. The trainer
// never asks which implementation it has:
//   local  one process: every collective is the identity;
//   gloo   ranks started without MPI (`folio train --nproc`, a torchrun-style environment,
//          SageMaker): Gloo over TCP, rendezvous through a small store on rank 0 (tcp_store.h);
//   mpi    ranks started by mpirun or srun: Open MPI;
//   nccl   GPU ranks with a GPU each: NCCL for device buffers, the launcher's gloo or mpi
//          communicator for host memory;
//   staged GPU ranks without NCCL (or sharing a GPU): gloo or mpi through host copies.
//
// Two kinds of memory, two sets of calls:
//   - device buffers (gradients, weights) live where the backend computes: a GPU's memory for the
//     CUDA backend, host memory for the CPU backend. A device collective may be queued on the
//     backend's stream (NCCL): the backend's later work sees its result.
//   - host memory (loss sums, eval sums, checksums, stop flags): the result is there when the call
//     returns. NCCL takes device pointers only, so its host calls go through the communicator
//     that started the job.
//
// Every collective is called by every rank in the same order. A rank that waits longer than
// dist_timeout for the others (one died or hangs) throws folio::Error saying which rank and what
// it was waiting for, so no job hangs forever. Sums give the same bits on every rank.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace folio {

class Communicator {
 public:
  // Notes the rank for the stop-signal handler's messages (waiting_for_peers.h).
  Communicator(int rank, int world_size, int local_rank);
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  bool is_root() const { return rank_ == 0; }
  virtual std::string name() const = 0;  // for the run's header: "gloo", "mpi", "nccl (...)"

  // ---- device buffers --------------------------------------------------------------------------
  // data[i] = sum over ranks of data[i].
  virtual void all_reduce_sum_device(float* data, size_t n) = 0;
  // Rank 0's n floats to every rank.
  virtual void broadcast_device(float* data, size_t n) = 0;

  // ---- device buffers summed while the backward pass goes on -----------------------------------
  // start_sum_device(data, n) begins what all_reduce_sum_device(data, n) does; finish_sums()
  // returns once every sum begun is done (or queued on the backend's stream, as NCCL's are). In
  // between, nothing reads or writes the buffers, and the only collective called is another
  // start_sum_device. Training begins one for each block's gradients as soon as the backward pass
  // has left the block (PyTorch DDP's buckets), so that the sums travel while the blocks below
  // compute. The default sums at once: no overlap, the same results.
  virtual void start_sum_device(float* data, size_t n) { all_reduce_sum_device(data, n); }
  virtual void finish_sums() {}

  // ---- host memory -----------------------------------------------------------------------------
  // data[i] = sum over ranks of data[i] (losses: double, so that sums of many terms keep digits).
  virtual void all_reduce_sum_host(double* data, size_t n) = 0;
  // data[i] = max over ranks of data[i] (stop flags).
  virtual void all_reduce_max_host(int64_t* data, size_t n) = 0;
  // Rank 0's `bytes` bytes to every rank.
  virtual void broadcast_host(void* data, size_t bytes) = 0;
  // Every rank's `bytes` bytes, in rank order, into `all` (world_size * bytes) on every rank.
  virtual void all_gather_host(const void* mine, void* all, size_t bytes) = 0;
  virtual void barrier() = 0;

 protected:
  // For a communicator that wraps another (staged, nccl): the same ranks, already noted. Inline,
  // so that the CUDA module (backend/cuda_module.h), which holds the NCCL one, needs nothing of
  // the binary.
  struct Wraps {
    const Communicator& wrapped;
  };
  explicit Communicator(Wraps wraps)
      : rank_(wraps.wrapped.rank_),
        world_size_(wraps.wrapped.world_size_),
        local_rank_(wraps.wrapped.local_rank_) {}

 private:
  int rank_, world_size_, local_rank_;
};

// One process: a sum or broadcast over one rank is the value itself.
class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator() : Communicator(0, 1, 0) {}
  std::string name() const override { return "local"; }
  void all_reduce_sum_device(float*, size_t) override {}
  void broadcast_device(float*, size_t) override {}
  void all_reduce_sum_host(double*, size_t) override {}
  void all_reduce_max_host(int64_t*, size_t) override {}
  void broadcast_host(void*, size_t) override {}
  void all_gather_host(const void* mine, void* all, size_t bytes) override;
  void barrier() override {}
};

// "waited 2.5 s (dist_timeout)": how each error of a wait for the other ranks that ran out begins
// (every communicator, the rendezvous store, the NCCL watchdog), so that a user reads one message.
inline std::string waited_dist_timeout(double seconds) {
  char text[64];
  std::snprintf(text, sizeof(text), "waited %g s (dist_timeout)", std::round(seconds * 10) / 10);
  return text;
}

// Every rank's `mine`, in rank order, on every rank: for the checks that ranks agree (their
// device, their config, their GPU). Each string travels as `width` bytes (longer ones are cut,
// shorter ones padded with zeros and given back without them). Inline, for the CUDA module's
// check as well (backend/cuda_module.h: it takes nothing from the binary).
inline std::vector<std::string> all_gather_strings(Communicator& communicator,
                                                   const std::string& mine, size_t width) {
  std::string padded = mine.substr(0, width);
  padded.resize(width, '\0');
  std::string all(width * communicator.world_size(), '\0');
  communicator.all_gather_host(padded.data(), all.data(), width);
  std::vector<std::string> strings;
  for (int rank = 0; rank < communicator.world_size(); ++rank) {
    std::string one = all.substr(rank * width, width);
    one.resize(one.find_last_not_of('\0') + 1);  // npos + 1 = 0: all zeros
    strings.push_back(std::move(one));
  }
  return strings;
}

}  // namespace folio
