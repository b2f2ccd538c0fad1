// The NCCL communicator on one GPU, one rank (label gpu; skipped without a visible GPU): every
// collective of the contract, on device buffers (through NCCL, on the backend's stream) and host
// buffers (through the bootstrap communicator), each call on values of its own.
//
// With one rank a sum or a broadcast is the identity, so this proves that the calls reach NCCL
// with the right pointers, counts, type and stream and leave the data (and the memory around it)
// as they should: not that NCCL adds across GPUs. Multi-rank NCCL sums need two GPUs; the
// equivalence tests of tests/distributed check the same contract's sums over Gloo and MPI.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend/device_buffer.h"
#include "distributed/launch_environment.h"
#include "distributed/make_communicator.h"
#include "distributed/nccl_communicator.h"
#include "gpu/gpu_test_helpers.h"

namespace folio::testing {
namespace {

class NcclCommunicatorTest : public GpuTest {};

// Values that differ per call and per element, with a guard element after the n sent.
std::vector<float> call_values(size_t n, int call) {
  std::vector<float> values(n + 1);
  for (size_t i = 0; i <= n; ++i)
    values[i] = static_cast<float>((i * 31 + static_cast<size_t>(call) * 977) % 4099) - 2049.5f;
  return values;
}

TEST_F(NcclCommunicatorTest, DeviceAndHostCollectivesOnOneRank) {
  std::unique_ptr<Backend> backend = cuda_backend("fp32");
  NcclCommunicator nccl(std::make_unique<LocalCommunicator>(), backend->native_stream(), 30);
  EXPECT_EQ(nccl.world_size(), 1);
  EXPECT_NE(nccl.name().find("nccl"), std::string::npos);

  int call = 0;
  for (size_t n : {size_t{1}, size_t{1000}, size_t{10788929}}) {
    for (bool broadcast : {false, true}) {
      const std::vector<float> sent = call_values(n, ++call);
      DeviceBuffer buffer = to_device(*backend, sent);
      if (broadcast)
        nccl.broadcast_device(buffer.as<float>(), n);
      else
        nccl.all_reduce_sum_device(buffer.as<float>(), n);
      backend->synchronize();
      const std::vector<float> got = to_host(*backend, buffer, n + 1);
      EXPECT_EQ(got, sent) << (broadcast ? "broadcast" : "all-reduce") << " of " << n;
    }
  }

  // Sums begun while the backend's stream goes on (a block's gradients each, as training starts
  // them), on the communicator's own stream: each after what the backend's stream had queued when
  // it began (here the buffer's fill), and finish_sums() orders the backend's later work after
  // them (here a fill of the guard element, then the read).
  {
    std::vector<std::vector<float>> sent;
    std::vector<DeviceBuffer> buffers;
    for (size_t n : {size_t{3}, size_t{1536 * 384}, size_t{4000000}}) {
      sent.push_back(call_values(n, ++call));
      buffers.push_back(DeviceBuffer(*backend, (n + 1) * sizeof(float)));
      backend->fill_zero(buffers.back().get(), (n + 1) * sizeof(float));
      backend->copy_to_device(buffers.back().get(), sent.back().data(), (n + 1) * sizeof(float));
      nccl.start_sum_device(buffers.back().as<float>(), n);
    }
    nccl.finish_sums();
    for (size_t b = 0; b < buffers.size(); ++b) {
      const size_t n = sent[b].size() - 1;
      backend->fill_zero(buffers[b].as<float>() + n, sizeof(float));  // after the sum
      sent[b][n] = 0.0f;
      backend->synchronize();
      EXPECT_EQ(to_host(*backend, buffers[b], n + 1), sent[b]) << "sum begun of " << n;
    }
    nccl.finish_sums();  // with none pending: nothing
  }

  double sums[3] = {1.25, -7.5e10, 3.0 + call};
  nccl.all_reduce_sum_host(sums, 3);
  EXPECT_EQ(sums[0], 1.25);
  EXPECT_EQ(sums[1], -7.5e10);
  EXPECT_EQ(sums[2], 3.0 + call);
  int64_t flags[2] = {0, int64_t{1} << 40};
  nccl.all_reduce_max_host(flags, 2);
  EXPECT_EQ(flags[1], int64_t{1} << 40);
  char text[8] = "weights";
  nccl.broadcast_host(text, sizeof(text));
  EXPECT_STREQ(text, "weights");
  const uint32_t mine = 0x5eed;
  uint32_t all = 0;
  nccl.all_gather_host(&mine, &all, sizeof(mine));
  EXPECT_EQ(all, 0x5eedu);
  nccl.barrier();
}

// What the trainer gets on a GPU under a launcher (here a torchrun-style job of one rank):
// NCCL, since the rank has its own GPU.
TEST_F(NcclCommunicatorTest, MadeForALaunchedGpuJob) {
  std::unique_ptr<Backend> backend = cuda_backend("fp32");
  LaunchEnvironment env;
  env.launcher = Launcher::kTorchrun;
  env.master_address = "127.0.0.1";
  env.master_port = 29599;
  std::unique_ptr<Communicator> communicator = make_communicator(env, 30, *backend);
  EXPECT_EQ(communicator->name().rfind("nccl", 0), 0u) << communicator->name();
  EXPECT_TRUE(every_rank_has_its_own_gpu(*communicator));
  const std::vector<float> sent = call_values(4097, 99);
  DeviceBuffer buffer = to_device(*backend, sent);
  communicator->all_reduce_sum_device(buffer.as<float>(), 4097);
  backend->synchronize();
  EXPECT_EQ(to_host(*backend, buffer, 4098), sent);
}

}  // namespace
}  // namespace folio::testing
