// Which launcher started this process, read from its environment (distributed/launch_environment.h).
#include <gtest/gtest.h>

#include "core/error.h"
#include "distributed/launch_environment.h"
#include "test_helpers.h"

namespace folio {
namespace {

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
    EXPECT_THROW(detect_launch_environment(), Error) << bad;
  }
  ScopedEnvironment port("MASTER_PORT", "65535");
  EXPECT_EQ(detect_launch_environment().master_port, 65535);
}

}  // namespace
}  // namespace folio
