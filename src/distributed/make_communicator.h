// The communicator for the launcher that started this process.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "distributed/communicator.h"
#include "distributed/launch_environment.h"

namespace folio {

// Local for one process; MPI under mpirun or srun; TCP for torchrun-style, SageMaker and
// `folio train --nproc` ranks; and on a GPU backend whose ranks each have a GPU of their own,
// NCCL for the gradient sums (bootstrapped over the MPI or TCP communicator, which keeps the
// small host collectives). Throws folio::Error when the build lacks what the launcher needs.
std::unique_ptr<Communicator> make_communicator(const LaunchEnvironment& env,
                                                double timeout_seconds, const Backend& backend);

bool mpi_available();  // this build has MPI

}  // namespace folio
