// All-reduce bandwidth of the communicator a launcher gives folio (Gloo for `--nproc` and
// torchrun-style ranks, Open MPI under mpirun): the sum of one fp32 gradient of
// `shakespeare_char` (10,788,929 floats, 43.2 MB) by default, as the trainer does every step.
//
//   folio_allreduce_bench --nproc 2 [--floats N] [--iterations K]    (Gloo)
//   mpirun -np 2 folio_allreduce_bench [--floats N] [--iterations K]  (Open MPI)
//
// Rank 0 prints the median and best time of K sums (after 2 warm-up sums), the algorithm
// bandwidth (bytes / time) and the bus bandwidth (2 (W-1)/W x that: what each rank sends and
// receives in a ring, comparable across W, as nccl-tests reports it). Each sum gets different
// values, and every rank checks the result, so a wrong or skipped sum fails the run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "distributed/launch_environment.h"
#include "distributed/local_ranks.h"
#include "distributed/make_communicator.h"

namespace {

// Small integers, so that every order of summation gives the exact same float.
float value_of(size_t index, int rank, int iteration) {
  return static_cast<float>((index * 7 + static_cast<size_t>(iteration)) % 1021) + rank;
}

int run(int argc, char** argv) {
  using namespace folio;
  size_t floats = 10788929;
  int iterations = 10, nproc = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    auto value = [&]() -> std::string {
      const size_t equals = argument.find('=');
      if (equals != std::string::npos) return argument.substr(equals + 1);
      if (i + 1 >= argc) throw Error(argument + " needs a value");
      return argv[++i];
    };
    if (argument.rfind("--floats", 0) == 0)
      floats = std::stoull(value());
    else if (argument.rfind("--iterations", 0) == 0)
      iterations = std::stoi(value());
    else if (argument.rfind("--nproc", 0) == 0)
      nproc = std::stoi(value());
    else
      throw Error("unknown option " + argument + ": use --floats N, --iterations K, --nproc N");
  }
  const LaunchEnvironment env = detect_launch_environment();
  if (nproc > 1 && !env.distributed()) {
    std::vector<std::string> arguments;
    for (int i = 1; i < argc; ++i)
      if (std::string(argv[i]).rfind("--nproc", 0) != 0)
        arguments.push_back(argv[i]);
      else if (std::string(argv[i]).find('=') == std::string::npos)
        ++i;
    return run_local_ranks(nproc, arguments);
  }
  const std::unique_ptr<Backend> backend = make_backend("cpu", 1);
  const std::unique_ptr<Communicator> communicator = make_communicator(env, 120, *backend);
  const int world = communicator->world_size(), rank = communicator->rank();

  std::vector<float> data(floats);
  std::vector<double> milliseconds;
  for (int iteration = -2; iteration < iterations; ++iteration) {
    for (size_t i = 0; i < floats; ++i) data[i] = value_of(i, rank, iteration);
    communicator->barrier();
    const auto start = std::chrono::steady_clock::now();
    communicator->all_reduce_sum_device(data.data(), floats);
    const auto stop = std::chrono::steady_clock::now();
    if (iteration >= 0)
      milliseconds.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    for (size_t i = 0; i < floats; i += 997) {
      float expected = 0.0f;
      for (int r = 0; r < world; ++r) expected += value_of(i, r, iteration);
      if (data[i] != expected)
        throw Error("rank " + std::to_string(rank) + ": element " + std::to_string(i) +
                    " of the sum is " + std::to_string(data[i]) + ", expected " +
                    std::to_string(expected));
    }
  }
  if (rank == 0 && !milliseconds.empty()) {
    std::sort(milliseconds.begin(), milliseconds.end());
    const double median = milliseconds[milliseconds.size() / 2];
    const double bytes = static_cast<double>(floats) * sizeof(float);
    const double algorithm_gbs = bytes / (median * 1e-3) / 1e9;
    std::printf(
        "%s, %d ranks, %zu floats (%.1f MB): median %.2f ms, best %.2f ms over %d sums; "
        "algorithm bandwidth %.2f GB/s, bus bandwidth %.2f GB/s\n",
        communicator->name().c_str(), world, floats, bytes / 1e6, median, milliseconds.front(),
        iterations, algorithm_gbs, algorithm_gbs * 2.0 * (world - 1) / world);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "folio_allreduce_bench: error: %s\n", error.what());
    return 1;
  }
}
