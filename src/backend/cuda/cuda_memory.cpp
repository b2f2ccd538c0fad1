#include "backend/cuda/cuda_memory.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

namespace folio {

namespace {

// The last kernel check_launch saw, for errors that surface at a later call.
std::atomic<const char*> last_kernel{nullptr};
std::atomic<bool> error_reported{false};
thread_local bool recording_step = false;
std::atomic<uint64_t> frees_of_device_memory{0};  // device_frees()

std::string describe(cudaError_t status, const char* what) {
  std::string text = std::string("CUDA error in ") + what + ": " + cudaGetErrorName(status) +
                     " (" + cudaGetErrorString(status) + ")";
  const char* kernel = last_kernel.load();
  if (kernel != nullptr && std::strcmp(kernel, what) != 0 && !sync_after_every_launch())
    text += std::string("; the last kernel launched was ") + kernel +
            ": rerun with FOLIO_CUDA_SYNC=1 to name the kernel that failed";
  return text;
}

}  // namespace

bool sync_after_every_launch() {
  static const bool sync = [] {
    const char* value = std::getenv("FOLIO_CUDA_SYNC");
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  return sync;
}

void set_recording_step(bool recording) {
  recording_step = recording;
}

void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so that the process can report and go on
    throw Error(std::string("out of GPU memory in ") + what +
                ": use a smaller model (n_layer, n_embd), batch_size or block_size");
  }
  error_reported = true;  // the exception carries the report
  throw Error(describe(status, what));
}

void check_launch(const char* kernel) {
  last_kernel = kernel;
  check_cuda(cudaGetLastError(), kernel);
  if (sync_after_every_launch() && !recording_step) {
    const std::string what = std::string("kernel ") + kernel + " (FOLIO_CUDA_SYNC=1)";
    check_cuda(cudaDeviceSynchronize(), what.c_str());
  }
}

void report_cuda_error_once(cudaError_t status, const char* what) noexcept {
  // At exit the runtime may be unloaded before the last release: nothing is wrong then.
  if (status == cudaSuccess || status == cudaErrorCudartUnloading) return;
  if (error_reported.exchange(true)) return;
  try {
    std::fprintf(stderr, "folio: error: %s\n", describe(status, what).c_str());
  } catch (...) {  // describe() allocates: report what can be reported without it
    std::fprintf(stderr, "folio: error: CUDA error in %s: %s\n", what, cudaGetErrorName(status));
  }
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(std::string("cuBLAS error in ") + what + ": " + cublasLtGetStatusName(status) +
              " (" + cublasLtGetStatusString(status) + ")");
}

// Destructors must not throw: a failure to release (during unwinding, say) is reported once.
void destroy_event(cudaEvent_t event) {
  report_cuda_error_once(cudaEventDestroy(event), "cudaEventDestroy");
}
void destroy_graph_exec(cudaGraphExec_t graph) {
  report_cuda_error_once(cudaGraphExecDestroy(graph), "cudaGraphExecDestroy");
}

CudaEvent make_event() {
  cudaEvent_t event = nullptr;
  check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  return CudaEvent(event);
}

void* DeviceAllocator::allocate(size_t bytes) {
  void* pointer = nullptr;
  const std::string what = "cudaMalloc of " + std::to_string(bytes >> 20) + " MiB";
  check_cuda(cudaMalloc(&pointer, bytes > 0 ? bytes : 1), what.c_str());
  return pointer;
}
void DeviceAllocator::release(void* pointer) {
  frees_of_device_memory.fetch_add(1, std::memory_order_relaxed);
  report_cuda_error_once(cudaFree(pointer), "cudaFree");
}
uint64_t device_frees() { return frees_of_device_memory.load(std::memory_order_relaxed); }

void* PinnedAllocator::allocate(size_t bytes) {
  void* pointer = nullptr;
  check_cuda(cudaHostAlloc(&pointer, bytes > 0 ? bytes : 1, cudaHostAllocDefault), "cudaHostAlloc");
  return pointer;
}
void PinnedAllocator::release(void* pointer) {
  report_cuda_error_once(cudaFreeHost(pointer), "cudaFreeHost");
}

}  // namespace folio
