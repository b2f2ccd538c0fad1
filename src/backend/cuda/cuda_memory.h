// Owned CUDA resources (RAII) and the checks that turn a failed CUDA call into a folio::Error.
// Plain C++ over the runtime API, so host-only files may include it.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace folio {

// Throws Error("CUDA error in <what>: <the runtime's message>") unless status is success. A
// kernel's fault surfaces at a later call; the message then names the last kernel launched.
void check_cuda(cudaError_t status, const char* what);
void check_cublas(cublasStatus_t status, const char* what);
// After a kernel launch: a bad configuration shows up here, not at the next call. With
// FOLIO_CUDA_SYNC=1 in the environment (for debugging a first run) it also waits for the kernel
// and checks it, so that a fault is reported with the name of the kernel that caused it; not
// while a step is being recorded (nothing runs then), but after each replay.
void check_launch(const char* kernel);
bool sync_after_every_launch();  // FOLIO_CUDA_SYNC=1
// Recording a step: check_launch must not synchronise then (it would break the recording).
void set_recording_step(bool recording);
// Where nothing may throw (destructors, release paths): prints `folio: error: CUDA error in
// <what>: ...` once per process, and nothing when check_cuda has already thrown for an error
// (the exception reports it; a sticky error then fails every later call too).
void report_cuda_error_once(cudaError_t status, const char* what) noexcept;

// Moves leave the source empty; the destructor releases whatever is held.
template <typename Handle, void (*destroy)(Handle)>
class CudaResource {
 public:
  CudaResource() = default;
  explicit CudaResource(Handle handle) : handle_(handle) {}
  CudaResource(CudaResource&& other) noexcept : handle_(std::exchange(other.handle_, Handle{})) {}
  CudaResource& operator=(CudaResource&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, Handle{});
    }
    return *this;
  }
  CudaResource(const CudaResource&) = delete;
  CudaResource& operator=(const CudaResource&) = delete;
  ~CudaResource() { reset(); }

  void reset() {
    if (handle_ != Handle{}) destroy(handle_);
    handle_ = Handle{};
  }
  Handle get() const { return handle_; }
  explicit operator bool() const { return handle_ != Handle{}; }

 private:
  Handle handle_{};
};

void destroy_event(cudaEvent_t event);
void destroy_graph_exec(cudaGraphExec_t graph);
using CudaEvent = CudaResource<cudaEvent_t, destroy_event>;
using CudaGraph = CudaResource<cudaGraphExec_t, destroy_graph_exec>;
CudaEvent make_event();  // without timing, the cheap kind

// Memory from one of CUDA's allocators, released when its owner goes.
template <typename Allocator>
class OwnedMemory {
 public:
  OwnedMemory() = default;
  explicit OwnedMemory(size_t bytes) : pointer_(Allocator::allocate(bytes)), bytes_(bytes) {}
  OwnedMemory(OwnedMemory&& other) noexcept
      : pointer_(std::exchange(other.pointer_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  OwnedMemory& operator=(OwnedMemory&& other) noexcept {
    if (this != &other) {
      reset();
      pointer_ = std::exchange(other.pointer_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  OwnedMemory(const OwnedMemory&) = delete;
  OwnedMemory& operator=(const OwnedMemory&) = delete;
  ~OwnedMemory() { reset(); }

  void reset() {
    if (pointer_ != nullptr) Allocator::release(pointer_);
    pointer_ = nullptr;
    bytes_ = 0;
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(pointer_);
  }
  void* get() const { return pointer_; }
  size_t bytes() const { return bytes_; }

 private:
  void* pointer_ = nullptr;
  size_t bytes_ = 0;
};

struct DeviceAllocator {  // cudaMalloc: device memory
  static void* allocate(size_t bytes);
  static void release(void* pointer);
};
// How many times this process has freed device memory (DeviceAllocator::release). A recorded
// step holds the addresses of the memory it used; one recorded at another count may point at
// memory that has been freed since (scratch that grew, a buffer released) and must not replay.
uint64_t device_frees();
struct PinnedAllocator {  // cudaHostAlloc: page-locked host memory, copied from without staging
  static void* allocate(size_t bytes);
  static void release(void* pointer);
};
using DeviceMemory = OwnedMemory<DeviceAllocator>;
using PinnedMemory = OwnedMemory<PinnedAllocator>;

}  // namespace folio
