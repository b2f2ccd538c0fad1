#include "distributed/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/error.h"

namespace folio {

namespace {

void check_nccl(ncclResult_t result, const char* what) {
  if (result != ncclSuccess)
    throw Error(std::string("NCCL ") + what + " failed: " + ncclGetErrorString(result) +
                " (NCCL_DEBUG=INFO says more)");
}

// This process's GPU as NCCL tells GPUs apart: its PCI bus id.
std::string gpu_bus_id() {
  int device = 0;
  cudaGetDevice(&device);
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device) != cudaSuccess) {
    cudaGetLastError();
    return "unknown";
  }
  return bus_id;
}

}  // namespace

NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> bootstrap, void* stream)
    : Communicator(bootstrap->rank(), bootstrap->world_size(), bootstrap->local_rank()),
      bootstrap_(std::move(bootstrap)), stream_(stream) {
  ncclUniqueId id{};
  if (is_root()) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  bootstrap_->broadcast(&id, sizeof(id));
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, world_size(), id, rank()), "ncclCommInitRank");
  comm_ = comm;
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  // After an error a peer may be gone: abort rather than wait for it.
  if (std::uncaught_exceptions() > 0)
    ncclCommAbort(static_cast<ncclComm_t>(comm_));
  else
    ncclCommDestroy(static_cast<ncclComm_t>(comm_));
}

void NcclCommunicator::all_reduce_sum(float* data, size_t n) {
  if (n == 0) return;  // (with one rank NCCL copies in place: kept, so that path is exercised)
  check_nccl(ncclAllReduce(data, data, n, ncclFloat, ncclSum, static_cast<ncclComm_t>(comm_),
                           static_cast<cudaStream_t>(stream_)),
             "all-reduce");
}

std::unique_ptr<Communicator> maybe_nccl(std::unique_ptr<Communicator> bootstrap, void* stream) {
  if (stream == nullptr) return bootstrap;
  // One GPU per rank, or NCCL refuses: compare the ranks' GPUs.
  char mine[32] = {};
  std::strncpy(mine, gpu_bus_id().c_str(), sizeof(mine) - 1);
  std::vector<char> all(sizeof(mine) * bootstrap->world_size());
  bootstrap->all_gather(mine, all.data(), sizeof(mine));
  for (int a = 0; a < bootstrap->world_size(); ++a)
    for (int b = a + 1; b < bootstrap->world_size(); ++b)
      if (std::strncmp(&all[a * sizeof(mine)], &all[b * sizeof(mine)], sizeof(mine)) == 0)
        return bootstrap;  // ranks share a GPU: sums go through host memory
  return std::make_unique<NcclCommunicator>(std::move(bootstrap), stream);
}

}  // namespace folio
