// An owned block of a backend's memory (RAII: released when the buffer goes).
#pragma once

#include <cstddef>
#include <utility>

#include "backend/backend.h"

namespace folio {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend& backend, size_t bytes)
      : backend_(&backend), pointer_(backend.allocate(bytes)), bytes_(bytes) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      backend_ = std::exchange(other.backend_, nullptr);
      pointer_ = std::exchange(other.pointer_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  void reset() {
    if (pointer_ != nullptr) backend_->release(pointer_);
    pointer_ = nullptr;
    bytes_ = 0;
  }
  template <typename T>
  T* as() const { return static_cast<T*>(pointer_); }
  void* get() const { return pointer_; }
  size_t bytes() const { return bytes_; }

 private:
  Backend* backend_ = nullptr;
  void* pointer_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace folio
