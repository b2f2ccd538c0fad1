// What the GPU tests share: a fixture that skips without a visible GPU (or fails, where a GPU is
// required), and moving tensors to and from a backend.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/device_buffer.h"
#include "require_gpu.h"
#include "test_helpers.h"

namespace folio::testing {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override { FOLIO_SKIP_WITHOUT_GPU(); }
};

inline std::unique_ptr<Backend> cuda_backend(const std::string& dtype, bool flash_attention = true,
                                             bool fused_kernels = true) {
  return make_backend("cuda", 0, BackendOptions{dtype, false, flash_attention, fused_kernels});
}

template <typename T>
DeviceBuffer to_device(Backend& backend, const std::vector<T>& host) {
  DeviceBuffer buffer(backend, std::max<size_t>(1, host.size()) * sizeof(T));
  backend.copy_to_device(buffer.get(), host.data(), host.size() * sizeof(T));
  return buffer;
}

inline std::vector<float> to_host(Backend& backend, const DeviceBuffer& buffer, size_t n) {
  std::vector<float> host(n);
  backend.copy_to_host(host.data(), buffer.get(), n * sizeof(float));
  return host;
}

inline std::vector<double> widened(const std::vector<float>& values) {
  return std::vector<double>(values.begin(), values.end());
}

}  // namespace folio::testing
