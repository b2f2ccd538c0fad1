#include "distributed/launch_environment.h"

#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace folio {

namespace {

const char* variable(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

int integer_variable(const char* name, int fallback, long most = 1 << 24,
                     const char* what = "a valid rank or size") {
  const char* value = variable(name);
  if (value == nullptr) return fallback;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed < 0 || parsed > most)
    throw UsageError(std::string("environment variable ") + name + "='" + value + "' is not " +
                     what);
  return static_cast<int>(parsed);
}

// A TCP port: above 65535 it was cut to 16 bits, listening on another port than every message
// named.
int port_variable(const char* name) {
  const int port = integer_variable(name, 29500, 65535, "a TCP port (1 to 65535)");
  if (port == 0)
    throw UsageError(std::string("environment variable ") + name +
                     "=0 is not a TCP port (1 to 65535)");
  return port;
}

}  // namespace

std::string LaunchEnvironment::launcher_name() const {
  switch (launcher) {
    case Launcher::kSingle: return "single process";
    case Launcher::kMpirun: return "mpirun";
    case Launcher::kSrun: return "srun";
    case Launcher::kTorchrun: return "torchrun-style environment";
    case Launcher::kSageMaker: return "SageMaker";
    case Launcher::kNproc: return "folio --nproc";
  }
  return "?";
}

LaunchEnvironment detect_launch_environment() {
  LaunchEnvironment env;
  if (const char* dir = variable("SM_CHANNEL_TRAINING")) env.sagemaker_data_dir = dir;
  if (const char* dir = variable("SM_MODEL_DIR")) env.sagemaker_model_dir = dir;

  // A rank that `folio train --nproc` started is that launcher's, whatever else it inherited
  // (under `mpirun -np 1 folio train --nproc 2` each took mpirun's variables for a job of one).
  const bool started_by_nproc =
      variable("FOLIO_NPROC_LAUNCHER") && variable("RANK") && variable("WORLD_SIZE");
  if (!started_by_nproc && variable("OMPI_COMM_WORLD_SIZE")) {
    env.launcher = Launcher::kMpirun;
    env.world_size = integer_variable("OMPI_COMM_WORLD_SIZE", 1);
    env.rank = integer_variable("OMPI_COMM_WORLD_RANK", 0);
    env.local_rank = integer_variable("OMPI_COMM_WORLD_LOCAL_RANK", 0);
  } else if (!started_by_nproc && variable("PMI_SIZE") && variable("PMI_RANK")) {
    env.launcher = Launcher::kMpirun;  // MPICH's hydra
    env.world_size = integer_variable("PMI_SIZE", 1);
    env.rank = integer_variable("PMI_RANK", 0);
    env.local_rank = integer_variable("MPI_LOCALRANKID", 0);
  } else if (variable("RANK") && variable("WORLD_SIZE")) {
    env.launcher = started_by_nproc ? Launcher::kNproc : Launcher::kTorchrun;
    env.world_size = integer_variable("WORLD_SIZE", 1);
    env.rank = integer_variable("RANK", 0);
    env.local_rank = integer_variable("LOCAL_RANK", env.rank);
    env.master_address = variable("MASTER_ADDR") ? variable("MASTER_ADDR") : "127.0.0.1";
    env.master_port = port_variable("MASTER_PORT");
  } else if (variable("SLURM_PROCID") && variable("SLURM_NTASKS")) {
    env.launcher = Launcher::kSrun;
    env.world_size = integer_variable("SLURM_NTASKS", 1);
    env.rank = integer_variable("SLURM_PROCID", 0);
    env.local_rank = integer_variable("SLURM_LOCALID", 0);
  } else if (variable("SM_HOSTS") && variable("SM_CURRENT_HOST")) {
    env.launcher = Launcher::kSageMaker;
    std::vector<std::string> hosts;
    try {
      hosts = nlohmann::json::parse(variable("SM_HOSTS")).get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception&) {
      throw UsageError("SM_HOSTS is not a JSON list of host names");
    }
    for (size_t i = 0; i < hosts.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (hosts[i] == hosts[j])
          throw UsageError("SM_HOSTS names host '" + hosts[i] +
                           "' twice: each host of the job once (its index is its rank)");
    const std::string current = variable("SM_CURRENT_HOST");
    int index = -1;
    for (size_t i = 0; i < hosts.size(); ++i)
      if (hosts[i] == current) index = static_cast<int>(i);
    if (index < 0) throw UsageError("SM_CURRENT_HOST '" + current + "' is not in SM_HOSTS");
    env.world_size = static_cast<int>(hosts.size());
    env.rank = index;
    env.local_rank = 0;
    env.master_address = variable("MASTER_ADDR") ? variable("MASTER_ADDR") : hosts.front();
    env.master_address_from = variable("MASTER_ADDR") ? "MASTER_ADDR" : "SM_HOSTS' first host";
    env.master_port = port_variable("MASTER_PORT");
  }
  // Half a torchrun-style environment had been ignored: the process trained alone.
  if (env.launcher == Launcher::kSingle && !variable("RANK") != !variable("WORLD_SIZE")) {
    const std::string set = variable("RANK") ? "RANK" : "WORLD_SIZE";
    const std::string unset = variable("RANK") ? "WORLD_SIZE" : "RANK";
    throw UsageError(set + " is set but " + unset + " is not: a torchrun-style launch sets both " +
                     "(with MASTER_ADDR and MASTER_PORT) on every process; set " + unset +
                     ", or unset " + set + " to train as one process");
  }
  if (env.world_size < 1 || env.rank >= env.world_size)
    throw UsageError("the launcher says rank " + std::to_string(env.rank) + " of " +
                     std::to_string(env.world_size) +
                     " ranks: the rank must be below the world size");
  return env;
}

}  // namespace folio
