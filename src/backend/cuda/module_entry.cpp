// The table that libfolio_cuda.so hands to the folio binary (backend/cuda_module.h): the CUDA
// backend and, where the build found NCCL, the NCCL communicator.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda_module.h"

#if defined(FOLIO_NCCL)
#include <nccl.h>

#include "distributed/nccl_communicator.h"
#endif

namespace folio {
namespace {

// "13.0" from CUDA's 13000.
std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string describe_module() {
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  int driver = 0;
  const bool has_driver = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0;
  cudaGetLastError();
  std::string text = "CUDA runtime " + cuda_version_text(runtime) + " (driver " +
                     (has_driver ? cuda_version_text(driver) : std::string("none")) +
                     "), cuBLASLt " + std::to_string(cublasLtGetVersion());
#if defined(FOLIO_NCCL)
  int nccl = 0;
  ncclGetVersion(&nccl);
  text += ", NCCL " + std::to_string(nccl / 10000) + "." + std::to_string(nccl / 100 % 100) + "." +
          std::to_string(nccl % 100);
#else
  text += ", no NCCL";
#endif
  return text;
}

#if defined(FOLIO_NCCL)
std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> bootstrap,
                                                     void* stream, double timeout_seconds) {
  return std::make_unique<NcclCommunicator>(std::move(bootstrap), stream, timeout_seconds);
}
#endif

CudaModule make_table() {
  CudaModule table;
  table.describe = describe_module;
  table.device_count = cuda_device_count;
  table.make_backend = make_cuda_backend;
#if defined(FOLIO_NCCL)
  table.every_rank_has_its_own_gpu = every_rank_has_its_own_gpu;
  table.make_nccl_communicator = make_nccl_communicator;
#endif
  return table;
}

}  // namespace
}  // namespace folio

extern "C" const folio::CudaModule* folio_cuda_module() {
  static const folio::CudaModule table = folio::make_table();
  return &table;
}
