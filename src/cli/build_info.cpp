#include "cli/build_info.h"

#include "backend/cpu/gemm.h"

#ifndef FOLIO_VERSION
#define FOLIO_VERSION "unknown"
#endif

namespace folio {

std::string build_info() {
  std::string backends = "cpu";
  std::string communicators = "local";
#if defined(FOLIO_CUDA)
  backends += ", cuda";
#endif
#if defined(FOLIO_MPI)
  communicators += ", mpi (mpirun, srun)";
#endif
#if defined(FOLIO_GLOO)
  communicators += ", gloo (--nproc, torchrun-style, SageMaker)";
#endif
#if defined(FOLIO_NCCL)
  communicators += ", nccl";
#endif
  std::string text = std::string("folio ") + FOLIO_VERSION + "\n";
  text += "backends: " + backends + "\n";
  text += std::string("cpu sgemm: ") + cpu::gemm_library() + "\n";
#if defined(FOLIO_CUDA)
  text += "cuda: yes (runtime and cuBLASLt)\n";
#else
  text += "cuda: no (built without a CUDA toolkit)\n";
#endif
  text += "communicators: " + communicators + "\n";
#if defined(FOLIO_PLOT)
  text += "plot: yes (cairo)\n";
#else
  text += "plot: no (built without cairo)\n";
#endif
  return text;
}

}  // namespace folio
