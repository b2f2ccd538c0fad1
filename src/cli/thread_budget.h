// CPU threads when several folio processes share a machine. A rank that takes every core while
// another rank (or another folio) does the same runs with twice as many runnable threads as
// cores, and OpenMP threads that spin while they wait then steal the cores the working threads
// need: a `tiny` step of 2 ms took 10 ms beside a second folio. So each rank of a job takes
// cores / (ranks on this machine) threads unless --threads says otherwise, and processes that
// share the machine, or find it busy, wait passively (OMP_WAIT_POLICY=passive) instead of spinning.
#pragma once

#include "distributed/launch_environment.h"

namespace folio {

// How many ranks of this job run on this machine, as the launcher says (torchrun's
// LOCAL_WORLD_SIZE, Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE, MPICH's MPI_LOCALNRANKS, SLURM's
// SLURM_NTASKS_PER_NODE); 1 when it says nothing.
int local_rank_count();

// `configured` (the threads key) when above 0; else the cores this process may run on divided
// by the ranks on this machine (when a launcher has already bound each rank to its own cores,
// those cores).
int threads_for_rank(int configured);

// Whether the machine already has at least one runnable process per core besides this one, now
// (the fewest of a few readings of /proc/loadavg's running count over 8 ms), so that spinning
// threads would take cores from others' work.
bool machine_is_busy();

// Call first thing in main(), before any parallel region: when OMP_WAIT_POLICY is not set and
// this process shares the machine (other ranks of its job on it, or a busy machine), sets it to
// passive. OpenMP reads it when its runtime starts, so the process runs itself again with it
// set (once). Measured with bench/contention.sh: two folio processes of 2 threads each on 2
// cores took 460-490 ms a `tiny` step with OpenMP's default wait (spin, then sleep), 141-148 ms
// spinning, 1.5 ms waiting passively; alone, spinning is best.
void prepare_threads_before_parallel_work(char** argv);

}  // namespace folio
