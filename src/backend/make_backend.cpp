// Picks the backend for --device: cpu, cuda, or auto (the GPU when this build has CUDA and a GPU
// is visible, else the CPU).
#include "backend/backend.h"
#include <iostream>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/gemm.h"
#include "backend/cuda_module.h"
#include "core/error.h"

namespace folio {

int visible_gpu_count() {
  const CudaModule* module = cuda_module();
  return module != nullptr ? module->device_count() : 0;
}

bool cuda_available() {
  return visible_gpu_count() > 0;
}

std::unique_ptr<Backend> make_backend(const std::string& device, int threads,
                                      const BackendOptions& options) {
  if (options.dtype != "auto" && options.dtype != "fp32" && options.dtype != "bf16")
    throw Error("unknown dtype '" + options.dtype + "': use auto, fp32 or bf16");
  if (device == "cpu" || (device == "auto" && !cuda_available())) {
    const bool bf16 = options.dtype == "bf16";
    std::unique_ptr<Backend> backend = cpu::make_dispatched_cpu_backend(threads, bf16);
    if (bf16 && !cpu::bf16_is_native()) {
      std::cerr << "folio: note: this CPU has no native bf16 (AVX512-BF16 or AMX): --dtype bf16 "
                   "runs its products "
                << cpu::bf16_kernels() << ", slower than --dtype fp32";
      // Generation's few-row products read the bf16 weights with AVX2 (gemm_bf16.cpp): half the
      // bytes a token, which is what sampling waits on.
      if (cpu::chosen_variant() != cpu::Variant::baseline)
        std::cerr << " to train; sampling reads the weights as bf16 and is faster";
      std::cerr << "\n";
    }
    return backend;
  }
  if (device == "cuda" || device == "auto") {
    std::string why;
    const CudaModule* module = cuda_module(&why);
    if (module == nullptr) throw Error("--device cuda: " + why + "; or use --device cpu");
    if (module->device_count() == 0)
      throw Error("--device cuda: no CUDA GPU is visible (check nvidia-smi and "
                  "CUDA_VISIBLE_DEVICES), or use --device cpu");
    return module->make_backend(threads, options);
  }
  throw Error("unknown device '" + device + "': use auto, cpu or cuda");
}

}  // namespace folio
