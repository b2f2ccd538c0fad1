// Finding and loading libfolio_cuda.so (cuda_module.h).
#include "backend/cuda_module.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <mutex>

namespace folio {

#if defined(FOLIO_CUDA)
namespace {

std::string loader_error() {
  const char* text = dlerror();
  return text != nullptr ? text : "unknown error";
}

// The directory of the running binary: the build puts the module beside `folio`.
std::string binary_directory() {
  char path[PATH_MAX] = {};
  const ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length <= 0) return "";
  return std::filesystem::path(std::string(path, length)).parent_path().string();
}

// Without an NVIDIA driver there is no GPU: say so without loading CUDA's libraries at all.
bool driver_installed(std::string* why) {
  if (dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != nullptr) return true;
  *why = "no CUDA GPU is visible: no NVIDIA driver is installed (" + loader_error() + ")";
  return false;
}

// The module beside the binary (the build puts it there), or where `cmake --install` puts it
// (PREFIX/lib/folio/ for PREFIX/bin/folio); failing both, one the binary already holds (a test
// program links it) or one on the loader's path (LD_LIBRARY_PATH).
const CudaModule* load_module(std::string* why) {
  const std::string directory = binary_directory();
  std::string found;
  for (const std::string& folder : {directory, directory + "/" + FOLIO_MODULE_FROM_BINARY}) {
    const std::string candidate = folder + "/" + kCudaModuleFile;
    if (!directory.empty() && found.empty() && std::filesystem::exists(candidate))
      found = candidate;
  }
  const std::string path = found.empty() ? kCudaModuleFile : found;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    if (!found.empty())
      *why = "the CUDA module " + path + " does not load: " + loader_error() +
             " (CUDA's libraries must be on the loader's path, e.g. LD_LIBRARY_PATH)";
    else
      *why = std::string("the CUDA module ") + kCudaModuleFile +
             " is neither beside the folio binary (" + directory + ") nor in " + directory + "/" +
             FOLIO_MODULE_FROM_BINARY +
             ": the build makes it beside, `cmake --install` puts it in the other; copy it along "
             "with folio (the loader said: " +
             loader_error() + ")";
    return nullptr;
  }
  using Entry = const CudaModule* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, "folio_cuda_module"));
  const CudaModule* module = entry != nullptr ? entry() : nullptr;
  if (module == nullptr) {
    *why = "the CUDA module " + path + " has no folio_cuda_module(): it is not folio's";
    dlclose(handle);
    return nullptr;
  }
  if (module->abi != kCudaModuleAbi) {
    *why = "the CUDA module " + path + " is from another build of folio (table version " +
           std::to_string(module->abi) + ", this binary's " + std::to_string(kCudaModuleAbi) +
           "): rebuild folio and copy both files";
    dlclose(handle);
    return nullptr;
  }
  return module;
}

}  // namespace

const CudaModule* cuda_module(std::string* why, bool require_driver) {
  static std::mutex mutex;
  static bool driver_checked = false, module_tried = false;
  static std::string driver_problem, module_problem;
  static const CudaModule* module = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (require_driver) {
    if (!driver_checked) driver_installed(&driver_problem);
    driver_checked = true;
    if (!driver_problem.empty()) {
      if (why != nullptr) *why = driver_problem;
      return nullptr;
    }
  }
  if (!module_tried) module = load_module(&module_problem);
  module_tried = true;
  if (module == nullptr && why != nullptr) *why = module_problem;
  return module;
}

#else

const CudaModule* cuda_module(std::string* why, bool /*require_driver*/) {
  if (why != nullptr)
    *why =
        "this folio was built without CUDA: rebuild it with the CUDA toolkit installed "
        "(cmake -DFOLIO_CUDA=ON)";
  return nullptr;
}

#endif

}  // namespace folio
