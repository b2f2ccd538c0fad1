// The communicator for the launcher that started this process and the backend it computes on.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "distributed/communicator.h"
#include "distributed/launch_environment.h"

namespace folio {

// Local for one process; MPI under mpirun or srun; Gloo for torchrun-style, SageMaker and
// `folio train --nproc` ranks. On a GPU backend (one with a stream): NCCL for the device buffers
// when every rank has a GPU of its own (bootstrapped over MPI or Gloo, which keep the host
// collectives), else MPI or Gloo through host copies. Throws folio::Error when the build lacks
// what the launcher needs. `backend` must outlive the communicator.
std::unique_ptr<Communicator> make_communicator(const LaunchEnvironment& env,
                                                double timeout_seconds, Backend& backend);

// Throws folio::Error on every rank unless all ranks pass the same backend name ("cpu", "cuda").
// One all-gather of the host communicator; nothing for one rank.
void check_ranks_compute_on_one_kind_of_device(Communicator& communicator,
                                               const std::string& backend_name);

bool mpi_available();  // this build has MPI

}  // namespace folio
