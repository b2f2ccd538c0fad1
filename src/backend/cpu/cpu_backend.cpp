// Memory, threads and the small reductions of the CPU backend. Device memory is host memory.
#include "backend/cpu/cpu_backend.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>

#include "backend/cpu/bf16_tiles.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/huge_pages.h"
#include "backend/cpu/gemm.h"
#include "core/error.h"

namespace folio {

namespace {

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, omp_get_num_procs());
}

}  // namespace

CpuBackend::CpuBackend(int threads, bool bf16)
    : threads_(threads > 0 ? threads : available_cores()),
      bf16_(bf16),
      tiles_engine_(bf16 && cpu::Variant::FOLIO_CPU_VARIANT == cpu::Variant::avx512
                        ? cpu::tiles::chosen_engine()
                        : cpu::tiles::Engine::none) {
  omp_set_num_threads(threads_);
  cpu::set_gemm_threads(threads_);
  scratch_.resize(static_cast<size_t>(threads_));
}

std::string CpuBackend::description() const {
  const std::string kernels = std::string(cpu::variant_name(cpu::Variant::FOLIO_CPU_VARIANT));
  const std::string products =
      bf16_ ? std::string("bf16 products: ") + cpu::bf16_kernels()
            : std::string(cpu::gemm_library()) + " sgemm";
  const std::string attention =
      tiles_engine_ == cpu::tiles::Engine::none
          ? ""
          : std::string(", attention bf16 on ") + cpu::tiles::engine_name(tiles_engine_);
  return "cpu (" + std::to_string(threads_) + " threads, " + kernels + " kernels, " + products +
         attention + ")";
}

void* CpuBackend::allocate(size_t bytes) {
  void* pointer = cpu::allocate_on_huge_pages(bytes);
  allocation_bytes_[pointer] = bytes;
  return pointer;
}

// A later allocation may put another tensor where a kept bf16 one was: forget those freed here.
void CpuBackend::release(void* pointer) {
  if (const auto found = allocation_bytes_.find(pointer); found != allocation_bytes_.end()) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(pointer), end = begin + found->second;
    kept_in_bf16_.erase(std::remove_if(kept_in_bf16_.begin(), kept_in_bf16_.end(),
                                       [&](const RoundedCopy& kept) {
                                         const auto at = reinterpret_cast<uintptr_t>(kept.source);
                                         return begin <= at && at < end;
                                       }),
                        kept_in_bf16_.end());
    allocation_bytes_.erase(found);
  }
  std::free(pointer);
}

void CpuBackend::copy_to_device(void* device, const void* host, size_t bytes) {
  wrote(device, bytes);
  if (bytes) std::memcpy(device, host, bytes);
}
void CpuBackend::copy_to_host(void* host, const void* device, size_t bytes) {
  if (bytes) std::memcpy(host, device, bytes);
}
void CpuBackend::copy_device(void* to, const void* from, size_t bytes) {
  wrote(to, bytes);
  if (bytes) std::memcpy(to, from, bytes);
}
void CpuBackend::fill_zero(void* device, size_t bytes) {
  wrote(device, bytes);
  // One core's stores do not fill the memory bandwidth: a large buffer (the gradients of a big
  // model, zeroed every step) is cleared by every thread, each its own contiguous part.
  constexpr size_t kParallelBytes = size_t(4) << 20;
  if (bytes < kParallelBytes) {
    if (bytes) std::memset(device, 0, bytes);
    return;
  }
#pragma omp parallel num_threads(threads_)
  {
    const size_t part = static_cast<size_t>(omp_get_thread_num());
    const size_t parts = static_cast<size_t>(omp_get_num_threads());
    const size_t begin = bytes * part / parts, end = bytes * (part + 1) / parts;
    std::memset(static_cast<char*>(device) + begin, 0, end - begin);
  }
}

float* CpuBackend::attention_scratch(int thread, size_t floats_per_thread) {
  std::vector<float>& buffer = scratch_[static_cast<size_t>(thread)];
  if (buffer.size() < floats_per_thread) buffer.resize(floats_per_thread);
  return buffer.data();
}

float* CpuBackend::thread_partials(size_t floats) {
  const size_t total = floats * static_cast<size_t>(threads_);
  if (partials_.size() < total) partials_.resize(total);
  std::fill(partials_.begin(), partials_.begin() + static_cast<std::ptrdiff_t>(total), 0.0f);
  return partials_.data();
}

void CpuBackend::reduce_thread_partials(float* out, size_t floats) const {
  for (int t = 0; t < threads_; ++t) {
    const float* part = partials_.data() + floats * static_cast<size_t>(t);
    for (size_t i = 0; i < floats; ++i) out[i] += part[i];
  }
}

// The batch split (backend.h). Up to 64 MiB of training activations (`tiny`, `seed004`, `baby`),
// whose every op takes microseconds: measured on a 2-core AMD EPYC Zen 4, `tiny`'s step took
// 0.46-0.66 ms with both threads on every op (0.82-1.34 ms in the slow stretches these shared
// machines go through) and 0.43-0.50 ms (0.65-0.72) as two halves side by side, a thread each. Larger models
// keep both threads on every op, whose products are then large enough to share well
// (shakespeare_char's training activations take over 1 GiB).
int CpuBackend::batch_split_ways(int batch_size, size_t activation_bytes) const {
  if (threads_ < 2 || batch_size < 2 || activation_bytes > kBatchSplitBudget) return 1;
  return std::min(threads_, batch_size);  // a share of at least one window each
}

std::unique_ptr<Backend> CpuBackend::make_twin() const {
  auto twin = std::make_unique<CpuBackend>(1, bf16_);
  // Its constructor set this thread's OpenMP (and BLAS) thread count to one; this backend's ops,
  // which this thread runs too, keep theirs.
  omp_set_num_threads(threads_);
  cpu::set_gemm_threads(threads_);
  return twin;
}

void CpuBackend::run_batch_split(int ways, const std::function<void(int share)>& share,
                                 float* sum, const std::vector<const float*>& parts, size_t n) {
  // Inside the team each share's ops open parallel regions of their own, which OpenMP then runs on
  // the thread that opens them (one active level; a nested team would oversubscribe the cores),
  // and oneDNN, called inside a parallel region, computes on the calling thread. A thread that
  // gets two shares (a team smaller than asked) runs them one after the other.
  omp_set_max_active_levels(1);
  std::vector<std::exception_ptr> failures(static_cast<size_t>(ways));
#pragma omp parallel num_threads(ways)
  for (int i = omp_get_thread_num(); i < ways; i += omp_get_num_threads()) {
    try {
      share(i);
    } catch (...) {
      failures[static_cast<size_t>(i)] = std::current_exception();
    }
  }
  for (const std::exception_ptr& failure : failures)
    if (failure) std::rethrow_exception(failure);
  wrote(sum, n * sizeof(float));
#pragma omp parallel num_threads(threads_)
  {
    const size_t part = static_cast<size_t>(omp_get_thread_num());
    const size_t count = static_cast<size_t>(omp_get_num_threads());
    const size_t begin = n * part / count, end = n * (part + 1) / count;
    std::memcpy(sum + begin, parts[0] + begin, (end - begin) * sizeof(float));
    for (size_t p = 1; p < parts.size(); ++p) {
      const float* in = parts[p];
#pragma omp simd
      for (size_t j = begin; j < end; ++j) sum[j] += in[j];
    }
  }
}

template <>
std::unique_ptr<Backend> cpu::make_cpu_backend<cpu::Variant::FOLIO_CPU_VARIANT>(int threads,
                                                                              bool bf16) {
  return std::make_unique<CpuBackend>(threads, bf16);
}

}  // namespace folio
