#include "distributed/make_communicator.h"

#include "core/error.h"
#include "distributed/tcp_communicator.h"

#if defined(FOLIO_MPI)
#include "distributed/mpi_communicator.h"
#endif
#if defined(FOLIO_NCCL)
#include "distributed/nccl_communicator.h"
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

std::unique_ptr<Communicator> host_communicator(const LaunchEnvironment& env,
                                                double timeout_seconds) {
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
      return std::make_unique<TcpCommunicator>(env, timeout_seconds);
  }
  throw Error("internal: unknown launcher");
}

}  // namespace

std::unique_ptr<Communicator> make_communicator(const LaunchEnvironment& env,
                                                double timeout_seconds, const Backend& backend) {
  std::unique_ptr<Communicator> communicator = host_communicator(env, timeout_seconds);
#if defined(FOLIO_NCCL)
  // Any launched job on GPUs (even of one rank: the NCCL path is then still the one taken).
  if (env.launcher != Launcher::kSingle && backend.native_stream() != nullptr)
    return maybe_nccl(std::move(communicator), backend.native_stream());
#else
  (void)backend;
#endif
  return communicator;
}

}  // namespace folio
