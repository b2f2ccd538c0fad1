// The CUDA half of folio is a module of its own, libfolio_cuda.so beside the folio binary, loaded
// the first time a run asks for a GPU. Linked into the binary, CUDA's libraries (the runtime,
// cuBLAS, cuBLASLt, NCCL) cost every CPU run about 150-220 MiB of resident memory and 0.1 s at
// start, and a binary built where the toolkit is installed would not even start where it is not
// (a CPU-only compute node). Loaded on demand, a CPU run never touches them.
//
// Both sides include this header: the module (src/backend/cuda/module_entry.cpp) fills one
// CudaModule and returns it from folio_cuda_module(); the binary (cuda_module.cpp) finds the
// module, checks that it came from the same build and uses the table. Nothing else crosses.
#pragma once

#include <memory>
#include <string>

namespace folio {

class Backend;
class Communicator;
struct BackendOptions;

// Raised whenever the table or the types it passes change: a module from another build of folio
// is refused rather than called through a table it does not match.
inline constexpr int kCudaModuleAbi = 2;
inline constexpr const char* kCudaModuleFile = "libfolio_cuda.so";

struct CudaModule {
  int abi = kCudaModuleAbi;
  // For `folio --version`: "CUDA runtime 13.0 (driver ...), cuBLASLt ..., NCCL 2.x".
  std::string (*describe)() = nullptr;
  // 0 when there is no driver or no GPU; never throws.
  int (*device_count)() = nullptr;
  std::unique_ptr<Backend> (*make_backend)(int threads, const BackendOptions& options) = nullptr;
  // Null when the module was built without NCCL. A collective: every rank of `host` calls it.
  bool (*every_rank_has_its_own_gpu)(Communicator& host) = nullptr;
  // `timeout_seconds` (dist_timeout) bounds the wait for a device collective a peer never joins.
  std::unique_ptr<Communicator> (*make_nccl_communicator)(std::unique_ptr<Communicator> bootstrap,
                                                          void* stream,
                                                          double timeout_seconds) = nullptr;
};

// The loaded module, or null with the reason in `why` (a build without CUDA; no NVIDIA driver;
// the module missing or refusing to load). Loads it at most once per process: `require_driver`
// false (for `folio --version`) loads it even where no NVIDIA driver is installed.
const CudaModule* cuda_module(std::string* why = nullptr, bool require_driver = true);

}  // namespace folio

// The module's one exported symbol.
extern "C" const folio::CudaModule* folio_cuda_module();
