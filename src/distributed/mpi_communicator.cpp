#include "distributed/mpi_communicator.h"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <exception>
#include <thread>

#include "core/error.h"
#include "distributed/waiting_for_peers.h"

namespace folio {

namespace {

int mpi_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// Initialises MPI (once) and says where this process stands in the job.
MpiWorld initialise_mpi() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      throw Error("MPI_Init failed: is this job started by mpirun or srun?");
  }
  // Errors come back as return codes, to become one clear line, not an abort with a stack.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MpiWorld world{0, 1};
  MPI_Comm_rank(MPI_COMM_WORLD, &world.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world.size);
  return world;
}

// Waits for a non-blocking collective that its MPI_I* call (returning `started`) began, giving up
// after the timeout. A call that failed (MPI_ERRORS_RETURN) began nothing: its request was never
// set, and testing it would read garbage.
void wait_for(int started, MPI_Request& request, double timeout_seconds, const char* what) {
  if (started != MPI_SUCCESS)
    throw Error("rank " + std::to_string(mpi_rank()) + ": MPI could not begin " + what +
                " (did a rank die?)");
  const WaitingForPeers waiting(what);
  const auto start = std::chrono::steady_clock::now();
  int done = 0;
  for (long polls = 0;; ++polls) {
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      throw Error("rank " + std::to_string(mpi_rank()) + ": MPI failed during " + what +
                  " (did a rank die?)");
    if (done) return;
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_seconds)
      throw Error("rank " + std::to_string(mpi_rank()) + ": " +
                  waited_dist_timeout(timeout_seconds) + " for the other ranks during " + what +
                  " (did a rank exit, die or hang?)");
    // Spin briefly (collectives usually finish in microseconds), then back off.
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void check_count(size_t count) {
  if (count > static_cast<size_t>(INT_MAX))
    throw Error("internal: MPI message of " + std::to_string(count) + " elements is too large");
}

// data = op over the ranks of data, in place.
void all_reduce(void* data, size_t n, MPI_Datatype type, MPI_Op op, double timeout_seconds,
                const char* what) {
  check_count(n);
  MPI_Request request;
  wait_for(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), type, op, MPI_COMM_WORLD,
                          &request),
           request, timeout_seconds, what);
}

}  // namespace

MpiCommunicator::MpiCommunicator(const LaunchEnvironment& env, double timeout_seconds)
    : MpiCommunicator(initialise_mpi(), env.local_rank, timeout_seconds) {
  if (world_size() != env.world_size)
    throw Error("MPI reports " + std::to_string(world_size()) + " ranks but the launcher said " +
                std::to_string(env.world_size));
}

MpiCommunicator::MpiCommunicator(const MpiWorld& world, int local_rank, double timeout_seconds)
    : Communicator(world.rank, world.size, local_rank), timeout_seconds_(timeout_seconds) {}

MpiCommunicator::~MpiCommunicator() {
  // On the way out of an error (a peer died or hangs) MPI_Finalize would wait for the peers
  // forever: leave without it; mpirun then stops the rest of the job.
  if (std::uncaught_exceptions() > 0) return;
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised) MPI_Finalize();
}

void MpiCommunicator::all_reduce_sum_device(float* data, size_t n) {
  if (world_size() > 1 && n > 0)
    all_reduce(data, n, MPI_FLOAT, MPI_SUM, timeout_seconds_, "a gradient all-reduce");
}

void MpiCommunicator::broadcast_device(float* data, size_t n) {
  broadcast_host(data, n * sizeof(float));
}

void MpiCommunicator::all_reduce_sum_host(double* data, size_t n) {
  if (world_size() > 1 && n > 0)
    all_reduce(data, n, MPI_DOUBLE, MPI_SUM, timeout_seconds_, "a loss all-reduce");
}

void MpiCommunicator::all_reduce_max_host(int64_t* data, size_t n) {
  if (world_size() > 1 && n > 0)
    all_reduce(data, n, MPI_INT64_T, MPI_MAX, timeout_seconds_, "a max all-reduce");
}

void MpiCommunicator::broadcast_host(void* data, size_t bytes) {
  if (world_size() == 1 || bytes == 0) return;
  check_count(bytes);
  MPI_Request request;
  wait_for(MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD, &request),
           request, timeout_seconds_, "a broadcast from rank 0");
}

void MpiCommunicator::all_gather_host(const void* mine, void* all, size_t bytes) {
  check_count(bytes * world_size());
  if (world_size() == 1) {
    if (mine != all) std::memmove(all, mine, bytes);
    return;
  }
  MPI_Request request;
  wait_for(MPI_Iallgather(mine, static_cast<int>(bytes), MPI_BYTE, all, static_cast<int>(bytes),
                          MPI_BYTE, MPI_COMM_WORLD, &request),
           request, timeout_seconds_, "an all-gather");
}

void MpiCommunicator::barrier() {
  if (world_size() == 1) return;
  MPI_Request request;
  wait_for(MPI_Ibarrier(MPI_COMM_WORLD, &request), request, timeout_seconds_, "a barrier");
}

}  // namespace folio
