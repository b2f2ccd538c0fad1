// Whether a GPU test runs, skips or fails: included by the GPU tests and by the op table's CUDA
// rows (tests/test_backend_ops.cpp), which are listed on every machine and skip without a GPU.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "backend/backend.h"

namespace folio::testing {

// FOLIO_REQUIRE_GPU=1 (bench/gpu/gpu_check.sh sets it on the GPU machine): a GPU test that finds
// no GPU fails instead of skipping, so that green there means tested.
inline bool gpu_required() {
  const char* value = std::getenv("FOLIO_REQUIRE_GPU");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

// In a test's body or SetUp: skips it (or fails it, where a GPU is required) without a GPU.
#define FOLIO_SKIP_WITHOUT_GPU()                                                               \
  do {                                                                                         \
    if (!::folio::cuda_available()) {                                                          \
      if (::folio::testing::gpu_required())                                                    \
        FAIL() << "no CUDA GPU is visible, and FOLIO_REQUIRE_GPU=1 requires one";              \
      GTEST_SKIP() << "no CUDA GPU is visible (or this folio was built without CUDA)";          \
    }                                                                                          \
  } while (false)

}  // namespace folio::testing
