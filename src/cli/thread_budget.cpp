#include "cli/thread_budget.h"

#include <sched.h>
#include <unistd.h>

#include <stdlib.h>  // getloadavg
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <string>

namespace folio {

namespace {

// A positive count from the environment, or 0. SLURM writes "2(x3)" for 2 tasks on 3 nodes.
int count_from(const char* variable) {
  const char* text = std::getenv(variable);
  if (text == nullptr) return 0;
  const int value = std::atoi(text);
  return value > 0 ? value : 0;
}

int online_cores() {
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  return cores > 0 ? static_cast<int>(cores) : 1;
}

int cores_in_affinity_mask() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return online_cores();
}

// Runnable tasks other than this one, now: /proc/loadavg's fourth field is "running/total", the
// running count including the reader. The fewest of a few readings 1 ms apart, so that a task
// that runs for a moment (a shell, this process's launcher) is not taken for load.
int other_runnable_tasks() {
  int fewest = -1;
  for (int reading = 0; reading < 8; ++reading) {
    if (reading > 0) ::usleep(1000);
    FILE* file = std::fopen("/proc/loadavg", "r");
    if (file == nullptr) return -1;
    double one, five, fifteen;
    int running = 0, total = 0;
    const int fields = std::fscanf(file, "%lf %lf %lf %d/%d", &one, &five, &fifteen, &running,
                                   &total);
    std::fclose(file);
    if (fields != 5) return -1;
    fewest = fewest < 0 ? running - 1 : std::min(fewest, running - 1);
  }
  return std::max(0, fewest);
}

bool started_by_nproc() {
  return std::getenv("FOLIO_NPROC_LAUNCHER") != nullptr;
}

}  // namespace

int local_rank_count() {
  // `folio train --nproc N` starts all N ranks on this machine.
  if (started_by_nproc()) return std::max(1, count_from("WORLD_SIZE"));
  for (const char* variable : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                               "SLURM_NTASKS_PER_NODE"})
    if (const int count = count_from(variable)) return count;
  return 1;
}

int threads_for_rank(int configured) {
  if (configured > 0) return configured;
  const int cores = cores_in_affinity_mask();
  // A launcher that binds each rank (mpirun --bind-to core) has already divided the machine;
  // `folio train --nproc` binds none, so its ranks share the cores they inherit.
  if (cores < online_cores() && !started_by_nproc()) return cores;
  return std::max(1, cores / local_rank_count());
}

bool machine_is_busy() {
  // What runs now, not the 1-minute load average: the average stays at the core count for a
  // minute after a job ends, and a folio started then (a benchmark's next run, the next job of a
  // script) waited passively on an idle machine: a `tiny` step took 3.7-4.2 ms instead of 0.6.
  const int others = other_runnable_tasks();
  if (others >= 0) return others >= online_cores();
  double load = 0;  // no /proc: the average is all there is
  return ::getloadavg(&load, 1) == 1 && load >= online_cores();
}

void prepare_threads_before_parallel_work(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;  // the user's choice, or done already
  if (local_rank_count() <= 1 && !machine_is_busy()) return;
  ::setenv("OMP_WAIT_POLICY", "passive", 1);
  ::execv("/proc/self/exe", argv);
  // Could not run itself again (no /proc): go on spinning, which is slower but correct.
}

}  // namespace folio
