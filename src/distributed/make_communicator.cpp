#include "distributed/make_communicator.h"

#include <vector>

#include "backend/cuda_module.h"
#include "core/error.h"
#include "distributed/staged_communicator.h"

#if defined(FOLIO_GLOO)
#include "distributed/gloo_communicator.h"
#endif
#if defined(FOLIO_MPI)
#include "distributed/mpi_communicator.h"
#endif

namespace folio {

bool mpi_available() {
#if defined(FOLIO_MPI)
  return true;
#else
  return false;
#endif
}

namespace {

// The communicator of the launcher, working in host memory.
std::unique_ptr<Communicator> host_communicator(const LaunchEnvironment& env,
                                                double timeout_seconds) {
  // A job of one rank (mpirun -np 1, torchrun with one process) has nobody to talk to.
  if (env.world_size == 1) return std::make_unique<LocalCommunicator>();
  switch (env.launcher) {
    case Launcher::kSingle:
      return std::make_unique<LocalCommunicator>();
    case Launcher::kMpirun:
    case Launcher::kSrun:
#if defined(FOLIO_MPI)
      return std::make_unique<MpiCommunicator>(env, timeout_seconds);
#else
      throw Error("started by " + env.launcher_name() +
                  ", but this folio was built without MPI: install libopenmpi-dev and rebuild, "
                  "or start the ranks with `folio train --nproc N` or a torchrun-style "
                  "environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)");
#endif
    case Launcher::kTorchrun:
    case Launcher::kSageMaker:
    case Launcher::kNproc:
#if defined(FOLIO_GLOO)
      return std::make_unique<GlooCommunicator>(env, timeout_seconds);
#else
      throw Error("started by " + env.launcher_name() +
                  ", but this folio was built without Gloo: install libgloo-dev and rebuild, or "
                  "start the ranks with mpirun");
#endif
  }
  throw Error("internal: unknown launcher");
}

}  // namespace

void check_ranks_compute_on_one_kind_of_device(Communicator& communicator,
                                               const std::string& backend_name) {
  if (communicator.world_size() == 1) return;
  const std::vector<std::string> names = all_gather_strings(communicator, backend_name, 16);
  for (int rank = 1; rank < communicator.world_size(); ++rank)
    if (names[rank] != names[0])
      throw Error("rank " + std::to_string(rank) + " computes on " + names[rank] +
                  " and rank 0 on " + names[0] +
                  ": every rank must compute on the same kind of device (with device = auto, "
                  "some machines of this job have a GPU and some not); set device = cpu for "
                  "every rank, or cuda on machines with a GPU each");
}

std::unique_ptr<Communicator> make_communicator(const LaunchEnvironment& env,
                                                double timeout_seconds, Backend& backend) {
  std::unique_ptr<Communicator> communicator = host_communicator(env, timeout_seconds);
  // Before any collective whose course depends on the device (NCCL's check below is one that
  // GPU ranks alone would call): ranks on unlike devices would also round unlike (dtype auto is
  // bf16 on a GPU, fp32 on the CPU), and their weights would part.
  check_ranks_compute_on_one_kind_of_device(*communicator, backend.name());
  // The CPU backend's device memory is host memory: the launcher's communicator takes it as is.
  if (backend.native_stream() == nullptr) return communicator;
  // Any launched job on GPUs (even of one rank: the NCCL path is then still the one taken), where
  // the CUDA module has NCCL.
  const CudaModule* cuda = env.launcher != Launcher::kSingle ? cuda_module() : nullptr;
  if (cuda != nullptr && cuda->make_nccl_communicator != nullptr &&
      cuda->every_rank_has_its_own_gpu(*communicator))
    return cuda->make_nccl_communicator(std::move(communicator), backend.native_stream(),
                                        timeout_seconds);
  if (communicator->world_size() == 1) return communicator;  // nothing to sum
  return std::make_unique<StagedCommunicator>(std::move(communicator), backend);
}

}  // namespace folio
