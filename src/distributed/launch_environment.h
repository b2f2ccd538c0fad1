// Who started this process, and so its rank, world size and local rank: mpirun (Open MPI or
// MPICH), srun (SLURM), a torchrun-style environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT, which `folio train --nproc` also sets for the ranks it starts), or SageMaker
// (SM_HOSTS, SM_CURRENT_HOST: rank = index of the current host, as seed 002 does).
#pragma once

#include <string>

namespace folio {

enum class Launcher { kSingle, kMpirun, kSrun, kTorchrun, kSageMaker, kNproc };

struct LaunchEnvironment {
  Launcher launcher = Launcher::kSingle;
  int rank = 0, world_size = 1, local_rank = 0;
  std::string master_address;  // rendezvous of the TCP communicator
  std::string master_address_from = "MASTER_ADDR";  // where it was read, for messages
  int master_port = 0;
  // SageMaker's channels: where the data is and where the model goes.
  std::string sagemaker_data_dir, sagemaker_model_dir;

  bool distributed() const { return world_size > 1; }
  std::string launcher_name() const;
};

// Reads the environment; throws folio::UsageError on inconsistent values (RANK >= WORLD_SIZE,
// RANK without WORLD_SIZE, ...).
LaunchEnvironment detect_launch_environment();

}  // namespace folio
