// Collectives over MPI (Debian's Open MPI), for jobs started by mpirun or srun. Each collective
// is started non-blocking and polled, so a rank whose peers died or hang gives up after
// dist_timeout with a clear error instead of waiting forever. Device buffers are host memory here
// (the CPU backend; make_communicator stages a GPU's buffers through host memory).
#pragma once

#include "distributed/communicator.h"
#include "distributed/launch_environment.h"

namespace folio {

// Where this process stands in MPI_COMM_WORLD.
struct MpiWorld {
  int rank, size;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(const LaunchEnvironment& env, double timeout_seconds);
  ~MpiCommunicator() override;

  std::string name() const override { return "mpi"; }
  void all_reduce_sum_device(float* data, size_t n) override;
  void broadcast_device(float* data, size_t n) override;
  void all_reduce_sum_host(double* data, size_t n) override;
  void all_reduce_max_host(int64_t* data, size_t n) override;
  void broadcast_host(void* data, size_t bytes) override;
  void all_gather_host(const void* mine, void* all, size_t bytes) override;
  void barrier() override;

 private:
  MpiCommunicator(const MpiWorld& world, int local_rank, double timeout_seconds);
  double timeout_seconds_;
};

}  // namespace folio
