// The communicator for the launcher that started this process.
#pragma once

#include <memory>

#include "dist/communicator.h"
#include "dist/launch_environment.h"

namespace folio {

// Local for one process; MPI under mpirun or srun; TCP for torchrun-style, SageMaker and
// `folio train --nproc` ranks. Throws folio::Error when the build lacks what the launcher needs.
std::unique_ptr<Communicator> make_communicator(const LaunchEnvironment& env,
                                                double timeout_seconds);

bool mpi_available();  // this build has MPI

}  // namespace folio
