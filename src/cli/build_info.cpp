#include "cli/build_info.h"

#include "backend/cpu/gemm.h"
#include "backend/cuda_module.h"

#ifndef FOLIO_VERSION
#define FOLIO_VERSION "unknown"
#endif

namespace folio {

std::string build_info() {
  std::string backends = "cpu";
  std::string communicators = "local";
  // The CUDA module is loaded here even without a driver: this is where a broken one shows.
  std::string cuda_problem;
  const CudaModule* cuda = cuda_module(&cuda_problem, /*require_driver=*/false);
#if defined(FOLIO_CUDA)
  backends += ", cuda";
#endif
#if defined(FOLIO_MPI)
  communicators += ", mpi (mpirun, srun)";
#endif
#if defined(FOLIO_GLOO)
  communicators += ", gloo (--nproc, torchrun-style, SageMaker)";
#endif
  if (cuda != nullptr && cuda->make_nccl_communicator != nullptr) communicators += ", nccl";
  std::string text = std::string("folio ") + FOLIO_VERSION + "\n";
  text += "backends: " + backends + "\n";
  text += std::string("cpu sgemm: ") + cpu::gemm_library() + "\n";
#if defined(FOLIO_CUDA)
  if (cuda != nullptr)
    text += std::string("cuda: yes (") + kCudaModuleFile + ": " + cuda->describe() + ")\n";
  else
    text += "cuda: built, but " + cuda_problem + "\n";
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
