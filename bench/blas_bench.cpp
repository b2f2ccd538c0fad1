// sgemm throughput of the BLAS libraries this build found, on the model's own shapes and on a
// large square product (the "peak" the README's fraction-of-peak refers to). Row-major
// C = A op(B) as the CPU backend calls it; median of repeated calls after two warm-ups.
//
//   folio_blas_bench [--threads N]
//
// OpenBLAS 0.3.21 picks its kernels when the library loads, from OPENBLAS_CORETYPE; run with
// OPENBLAS_CORETYPE=SkylakeX to see its AVX-512 kernels on an AVX-512 machine.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#if defined(FOLIO_BENCH_DNNL)
#include <dnnl.h>
#endif
#if defined(FOLIO_BENCH_OPENBLAS)
#include <cblas.h>
#endif

namespace {

struct Shape {
  const char* what;
  bool transpose_a, transpose_b;
  int M, N, K;
};

using Gemm = std::function<void(const Shape&, const float*, const float*, float*)>;

double median_gflops(const Shape& s, const Gemm& gemm) {
  std::mt19937 generator(1);
  std::normal_distribution<float> normal;
  std::vector<float> A(size_t(s.M) * s.K), B(size_t(s.K) * s.N), C(size_t(s.M) * s.N);
  for (float& x : A) x = normal(generator);
  for (float& x : B) x = normal(generator);
  gemm(s, A.data(), B.data(), C.data());
  gemm(s, A.data(), B.data(), C.data());
  const double flops = 2.0 * s.M * s.N * s.K;
  const int repeats = std::clamp(static_cast<int>(3e10 / flops), 5, 200);
  std::vector<double> seconds;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    gemm(s, A.data(), B.data(), C.data());
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return flops / seconds[seconds.size() / 2] / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
  if (threads > 0) omp_set_num_threads(threads);
  const Shape shapes[] = {
      {"square 4096 (peak)", false, true, 4096, 4096, 4096},
      {"qkv forward", false, true, 16384, 1152, 384},
      {"ffwd.net.0 forward", false, true, 16384, 1536, 384},
      {"ffwd.net.2 forward", false, true, 16384, 384, 1536},
      {"lm_head forward", false, true, 16384, 65, 384},
      {"ffwd.net.2 dinp", false, false, 16384, 1536, 384},
      {"ffwd.net.0 dweight", true, false, 1536, 384, 16384},
      {"attention scores (1 thread)", false, true, 64, 256, 64},
      {"baby ffwd forward", false, true, 768, 512, 128},
      {"baby ffwd.net.2 dinp", false, false, 768, 512, 128},
      {"baby ffwd.net.0 dweight", true, false, 512, 128, 768},
      {"baby qkv forward", false, true, 768, 384, 128},
      {"baby qkv dinp", false, false, 768, 128, 384},
      {"baby qkv dweight", true, false, 384, 128, 768},
      {"baby proj dweight", true, false, 128, 128, 768},
  };
  std::vector<std::pair<std::string, Gemm>> libraries;
#if defined(FOLIO_BENCH_DNNL)
  libraries.emplace_back("oneDNN", [](const Shape& s, const float* A, const float* B, float* C) {
    dnnl_sgemm(s.transpose_a ? 'T' : 'N', s.transpose_b ? 'T' : 'N', s.M, s.N, s.K, 1.0f, A,
               s.transpose_a ? s.M : s.K, B, s.transpose_b ? s.K : s.N, 0.0f, C, s.N);
  });
#endif
#if defined(FOLIO_BENCH_OPENBLAS)
  if (threads > 0) openblas_set_num_threads(threads);
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  libraries.emplace_back(std::string("OpenBLAS (") + (core ? core : "auto") + ")",
                         [](const Shape& s, const float* A, const float* B, float* C) {
                           cblas_sgemm(CblasRowMajor, s.transpose_a ? CblasTrans : CblasNoTrans,
                                       s.transpose_b ? CblasTrans : CblasNoTrans, s.M, s.N, s.K,
                                       1.0f, A, s.transpose_a ? s.M : s.K, B,
                                       s.transpose_b ? s.K : s.N, 0.0f, C, s.N);
                         });
#endif
  std::printf("| shape | M x N x K |");
  for (const auto& library : libraries) std::printf(" %s GFLOP/s |", library.first.c_str());
  std::printf("\n|---|---|");
  for (size_t i = 0; i < libraries.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const Shape& s : shapes) {
    const bool single = std::strstr(s.what, "1 thread") != nullptr;
    std::printf("| %s | %d x %d x %d |", s.what, s.M, s.N, s.K);
    for (const auto& library : libraries) {
      const int saved = omp_get_max_threads();
#if defined(FOLIO_BENCH_OPENBLAS)
      if (single) openblas_set_num_threads(1);
#endif
      if (single) omp_set_num_threads(1);
      std::printf(" %.0f |", median_gflops(s, library.second));
      if (single) omp_set_num_threads(saved);
#if defined(FOLIO_BENCH_OPENBLAS)
      if (single) openblas_set_num_threads(saved);
#endif
    }
    std::printf("\n");
  }
  return 0;
}
