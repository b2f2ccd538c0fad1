#include "train/mfu.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

#include "backend/device_buffer.h"

namespace folio {

double training_flops_per_token(const ModelShape& shape, size_t parameter_count) {
  return 6.0 * static_cast<double>(parameter_count) +
         12.0 * shape.n_layer * shape.block_size * static_cast<double>(shape.attention_width());
}

double model_flops_utilization(double tokens_per_second, double flops_per_token,
                               double peak_flops_per_second) {
  if (!(peak_flops_per_second > 0)) return std::numeric_limits<double>::quiet_NaN();
  return tokens_per_second * flops_per_token / peak_flops_per_second;
}

double measure_matmul_flops(Backend& backend, int size, double min_seconds) {
  using Clock = std::chrono::steady_clock;
  const size_t elements = static_cast<size_t>(size) * size;
  const size_t bytes = elements * sizeof(float);
  // Small ordinary values: zeros could meet a BLAS shortcut, huge ones denormal or inf slowdowns.
  const std::vector<float> host(elements, 0.01f);
  DeviceBuffer input(backend, bytes), weight(backend, bytes), output(backend, bytes);
  backend.copy_to_device(input.get(), host.data(), bytes);
  backend.copy_to_device(weight.get(), host.data(), bytes);

  auto timed_product = [&] {
    const Clock::time_point start = Clock::now();
    backend.matmul_forward(output.as<float>(), input.as<float>(), weight.as<float>(), nullptr, size,
                           size, size);
    backend.synchronize();
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  timed_product();  // warm-up: first-touch of the pages, the BLAS's kernel selection
  double fastest = std::numeric_limits<double>::infinity(), spent = 0;
  while (spent < min_seconds) {
    const double seconds = timed_product();
    fastest = std::min(fastest, seconds);
    spent += seconds;
  }
  return 2.0 * size * static_cast<double>(size) * size / fastest;
}

}  // namespace folio
