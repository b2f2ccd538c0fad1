#include "backend/cuda/cuda_memory.h"

#include <string>

#include "core/error.h"

namespace folio {

void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so that the process can report and go on
    throw Error(std::string("out of GPU memory in ") + what +
                ": use a smaller batch_size or block_size");
  }
  throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorName(status) + " (" +
              cudaGetErrorString(status) + ")");
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(std::string("cuBLASLt error in ") + what + ": " + cublasLtGetStatusName(status) +
              " (" + cublasLtGetStatusString(status) + ")");
}

// Destructors must not throw: a failure to release during unwinding has nowhere to go.
void destroy_event(cudaEvent_t event) {
  cudaEventDestroy(event);
}
void destroy_graph_exec(cudaGraphExec_t graph) {
  cudaGraphExecDestroy(graph);
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
  cudaFree(pointer);
}

void* PinnedAllocator::allocate(size_t bytes) {
  void* pointer = nullptr;
  check_cuda(cudaHostAlloc(&pointer, bytes > 0 ? bytes : 1, cudaHostAllocDefault), "cudaHostAlloc");
  return pointer;
}
void PinnedAllocator::release(void* pointer) {
  cudaFreeHost(pointer);
}

}  // namespace folio
