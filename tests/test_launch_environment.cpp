// Which launcher started this process, read from its environment (distributed/launch_environment.h).
#include <gtest/gtest.h>

#include "core/error.h"
#include "distributed/launch_environment.h"
#include "test_helpers.h"

namespace folio {
namespace {

using testing::error_message;
using testing::ScopedEnvironment;

// `mpirun -np 1 folio train --nproc 2`: each rank the launcher starts inherits mpirun's variables
// for a job of one, and took them before its own RANK / WORLD_SIZE (two runs of one rank each,
// writing the same out_dir); a rank folio started is that launcher's.
TEST(LaunchEnvironment, RanksStartedByNprocAreItsRanksUnderMpirun) {
  ScopedEnvironment size("OMPI_COMM_WORLD_SIZE", "1"), mpi_rank("OMPI_COMM_WORLD_RANK", "0");
  EXPECT_EQ(detect_launch_environment().launcher, Launcher::kMpirun);
  ScopedEnvironment rank("RANK", "1"), world("WORLD_SIZE", "2"), port("MASTER_PORT", "29611"),
      launched("FOLIO_NPROC_LAUNCHER", "1");
  const LaunchEnvironment env = detect_launch_environment();
  EXPECT_EQ(env.launcher, Launcher::kNproc);
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.world_size, 2);
  EXPECT_EQ(env.master_port, 29611);
}

// A port above 65535 was cut to 16 bits: MASTER_PORT=95536 listened on 30000 while every message
// named 95536.
TEST(LaunchEnvironment, RefusesAPortOutsideOneTo65535) {
  ScopedEnvironment rank("RANK", "0"), world("WORLD_SIZE", "2");
  for (const char* bad : {"95536", "0", "-1", "80x"}) {
    ScopedEnvironment port("MASTER_PORT", bad);
    EXPECT_THROW(detect_launch_environment(), UsageError) << bad;
  }
  ScopedEnvironment port("MASTER_PORT", "65535");
  EXPECT_EQ(detect_launch_environment().master_port, 65535);
}

// Launch variables are the command's input: bad ones are usage errors, exit 2 (they had been 1).
TEST(LaunchEnvironment, BadVariablesAreUsageErrors) {
  for (const auto& [rank, world] : {std::pair{"2", "2"}, {"-1", "2"}, {"0", "abc"}}) {
    ScopedEnvironment rank_variable("RANK", rank), world_variable("WORLD_SIZE", world);
    EXPECT_THROW(detect_launch_environment(), UsageError) << rank << " of " << world;
  }
}

// RANK without WORLD_SIZE, or the other way round, had been ignored: the process trained alone.
TEST(LaunchEnvironment, HalfATorchrunEnvironmentIsRefusedNamingWhatIsMissing) {
  for (const auto& [set, missing] : {std::pair{"RANK", "WORLD_SIZE"}, {"WORLD_SIZE", "RANK"}}) {
    ScopedEnvironment variable(set, "1");
    const std::string message = error_message([] { detect_launch_environment(); });
    EXPECT_EQ(message.rfind(std::string(set) + " is set but " + missing + " is not", 0), 0u)
        << message;
    EXPECT_THROW(detect_launch_environment(), UsageError);
  }
}

// A host named twice in SM_HOSTS had been accepted: two processes of one rank.
TEST(LaunchEnvironment, SageMakerHostsNamedTwiceAreRefused) {
  ScopedEnvironment hosts("SM_HOSTS", R"(["algo-1", "algo-2", "algo-1"])"),
      current("SM_CURRENT_HOST", "algo-2");
  EXPECT_THROW(detect_launch_environment(), UsageError);
  EXPECT_NE(error_message([] { detect_launch_environment(); }).find("names host 'algo-1' twice"),
            std::string::npos);
}

// The rendezvous address comes from SM_HOSTS unless MASTER_ADDR is set: messages say which.
TEST(LaunchEnvironment, SaysWhereTheRendezvousAddressCameFrom) {
  ScopedEnvironment hosts("SM_HOSTS", R"(["algo-1", "algo-2"])"),
      current("SM_CURRENT_HOST", "algo-2");
  EXPECT_EQ(detect_launch_environment().master_address_from, "SM_HOSTS' first host");
  ScopedEnvironment address("MASTER_ADDR", "10.0.0.1");
  EXPECT_EQ(detect_launch_environment().master_address_from, "MASTER_ADDR");
}

}  // namespace
}  // namespace folio
