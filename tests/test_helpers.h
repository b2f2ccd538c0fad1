// Small helpers shared by the tests: temporary files, random tensors, relative errors.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"

namespace folio::testing {

// A folder under the system temp dir, removed when the object goes.
class TempDir {
 public:
  TempDir() {
    std::random_device device;
    path_ = std::filesystem::temp_directory_path() /
            ("folio_test_" + std::to_string(device()) + std::to_string(device()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(file(name), std::ios::binary) << bytes;
    return file(name);
  }

 private:
  std::filesystem::path path_;
};

template <typename T>
std::vector<T> random_vector(size_t n, uint32_t seed, double scale = 1.0) {
  std::mt19937 generator(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<T> values(n);
  for (T& v : values) v = static_cast<T>(normal(generator));
  return values;
}

// ||a - b|| / ||b||
template <typename A, typename B>
double relative_error(const std::vector<A>& a, const std::vector<B>& b) {
  EXPECT_EQ(a.size(), b.size());
  double difference = 0, reference = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    difference += d * d;
    reference += static_cast<double>(b[i]) * static_cast<double>(b[i]);
    if (!std::isfinite(static_cast<double>(a[i]))) return INFINITY;
  }
  return reference > 0 ? std::sqrt(difference / reference) : std::sqrt(difference);
}

// The message of the folio::Error that f throws, or "" when it throws none.
inline std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

inline std::string shakespeare_path() {
  const char* path = std::getenv("FOLIO_TEST_DATA");
  return path ? path : "";
}

// An environment variable set within its scope, unset after (a CUDA backend reads its own at
// construction: FOLIO_ATTENTION_*, FOLIO_CUDA_RELU_OUTPUT; the launch environment is read from
// RANK, OMPI_COMM_WORLD_SIZE, ...).
struct ScopedEnvironment {
  ScopedEnvironment(const char* name, const char* value) : name(name) { ::setenv(name, value, 1); }
  ~ScopedEnvironment() { ::unsetenv(name); }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;
  const char* name;
};

}  // namespace folio::testing
