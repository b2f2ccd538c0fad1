#include "distributed/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <set>
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

void check_cuda_call(cudaError_t result, const char* what) {
  if (result != cudaSuccess)
    throw Error(std::string(what) + " failed: " + cudaGetErrorString(result));
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

NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> bootstrap, void* stream,
                                   double timeout_seconds)
    : Communicator(Wraps{*bootstrap}), bootstrap_(std::move(bootstrap)), stream_(stream) {
  ncclUniqueId id{};
  if (is_root()) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  bootstrap_->broadcast_host(&id, sizeof(id));
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, world_size(), id, rank()), "ncclCommInitRank");
  comm_ = comm;
  // One rank waits for nobody (and its step may be recorded as a CUDA graph, where a host
  // function would run at every replay but queued() only once).
  if (world_size() == 1) return;
  int device = 0;
  cudaGetDevice(&device);
  const int rank_number = rank();
  CollectiveWatchdog::Hooks hooks;
  hooks.library_error = [comm, device] {
    cudaSetDevice(device);  // the watchdog's thread asks about this rank's GPU
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess)
      return std::string("NCCL could not say how its collectives fare");
    if (state == ncclSuccess || state == ncclInProgress) return std::string();
    return std::string("NCCL failed (") + ncclGetErrorString(state) + ")";
  };
  // The rank cannot go on (its GPU is stuck in the collective) nor save (that needs the GPU):
  // it says why and ends, and its launcher stops the others, as for a rank that died.
  hooks.give_up = [rank_number](const std::string& message) {
    std::fprintf(stderr, "folio: error: rank %d: %s\n", rank_number, message.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  };
  cudaStream_t watch_stream = nullptr;
  cudaEvent_t collective_queued = nullptr;
  check_cuda_call(cudaStreamCreateWithFlags(&watch_stream, cudaStreamNonBlocking),
                  "cudaStreamCreate");
  check_cuda_call(cudaEventCreateWithFlags(&collective_queued, cudaEventDisableTiming),
                  "cudaEventCreate");
  watch_stream_ = watch_stream;
  collective_queued_ = collective_queued;
  watchdog_ = std::make_unique<CollectiveWatchdog>(timeout_seconds, std::move(hooks));
}

// Tells the watchdog that `what` is queued on `stream`, and queues the host function that tells
// it the collective is done. On a stream of its own, which waits for `stream` up to here: a host
// function holds up its stream until it has run, and the backend's kernels must not wait for it.
void NcclCommunicator::watch(void* stream, const char* what) {
  if (!watchdog_) return;
  const auto watch_stream = static_cast<cudaStream_t>(watch_stream_);
  const auto queued_event = static_cast<cudaEvent_t>(collective_queued_);
  watchdog_->queued(what);
  check_cuda_call(cudaEventRecord(queued_event, static_cast<cudaStream_t>(stream)),
                  "cudaEventRecord");
  check_cuda_call(cudaStreamWaitEvent(watch_stream, queued_event, 0), "cudaStreamWaitEvent");
  check_cuda_call(
      cudaLaunchHostFunc(
          watch_stream,
          [](void* watchdog) { static_cast<CollectiveWatchdog*>(watchdog)->done(); },
          watchdog_.get()),
      "cudaLaunchHostFunc");
}

NcclCommunicator::~NcclCommunicator() {
  if (watchdog_) {
    // The host functions still queued hold the watchdog's address: once the stream has run them
    // it can go. After an error a collective may never end (a peer is gone), so its host
    // function may run later, or never: the watchdog and its stream are then left to the
    // process's end.
    const auto watch_stream = static_cast<cudaStream_t>(watch_stream_);
    if (std::uncaught_exceptions() == 0) cudaStreamSynchronize(watch_stream);
    // No more questions to NCCL about a communicator about to go, and no giving up: the rank is
    // ending already.
    watchdog_->stop();
    if (watchdog_->pending() > 0) {
      watchdog_.release();
    } else {
      cudaEventDestroy(static_cast<cudaEvent_t>(collective_queued_));
      cudaStreamDestroy(watch_stream);
    }
  }
  if (sum_stream_ != nullptr) {
    cudaEventDestroy(static_cast<cudaEvent_t>(gradients_ready_));
    cudaEventDestroy(static_cast<cudaEvent_t>(sums_done_));
    cudaStreamDestroy(static_cast<cudaStream_t>(sum_stream_));
  }
  if (comm_ == nullptr) return;
  // After an error a peer may be gone: abort rather than wait for it.
  if (std::uncaught_exceptions() > 0)
    ncclCommAbort(static_cast<ncclComm_t>(comm_));
  else
    ncclCommDestroy(static_cast<ncclComm_t>(comm_));
}

// Both are queued on the backend's stream; with one rank NCCL still runs them (a copy in place),
// so the one-GPU test exercises this path.
void NcclCommunicator::all_reduce_sum_device(float* data, size_t n) {
  if (n == 0) return;
  check_nccl(ncclAllReduce(data, data, n, ncclFloat, ncclSum, static_cast<ncclComm_t>(comm_),
                           static_cast<cudaStream_t>(stream_)),
             "all-reduce");
  watch(stream_, "a gradient all-reduce");
}

void NcclCommunicator::start_sum_device(float* data, size_t n) {
  if (n == 0) return;
  if (sum_stream_ == nullptr) {
    cudaStream_t stream = nullptr;
    cudaEvent_t ready = nullptr, done = nullptr;
    check_cuda_call(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda_call(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda_call(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    sum_stream_ = stream;
    gradients_ready_ = ready;
    sums_done_ = done;
  }
  const auto sum_stream = static_cast<cudaStream_t>(sum_stream_);
  const auto ready = static_cast<cudaEvent_t>(gradients_ready_);
  check_cuda_call(cudaEventRecord(ready, static_cast<cudaStream_t>(stream_)), "cudaEventRecord");
  check_cuda_call(cudaStreamWaitEvent(sum_stream, ready, 0), "cudaStreamWaitEvent");
  check_nccl(
      ncclAllReduce(data, data, n, ncclFloat, ncclSum, static_cast<ncclComm_t>(comm_), sum_stream),
      "all-reduce");
  sums_pending_ = true;
}

void NcclCommunicator::finish_sums() {
  if (!sums_pending_) return;
  const auto done = static_cast<cudaEvent_t>(sums_done_);
  check_cuda_call(cudaEventRecord(done, static_cast<cudaStream_t>(sum_stream_)), "cudaEventRecord");
  check_cuda_call(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream_), done, 0),
                  "cudaStreamWaitEvent");
  // One watch for the step's sums: the host reaches here without waiting for any of them.
  watch(sum_stream_, "the gradient sums");
  sums_pending_ = false;
}

void NcclCommunicator::broadcast_device(float* data, size_t n) {
  if (n == 0) return;
  check_nccl(ncclBroadcast(data, data, n, ncclFloat, 0, static_cast<ncclComm_t>(comm_),
                           static_cast<cudaStream_t>(stream_)),
             "broadcast");
  watch(stream_, "the broadcast of rank 0's weights");
}

bool every_rank_has_its_own_gpu(Communicator& host) {
  const std::vector<std::string> bus_ids = all_gather_strings(host, gpu_bus_id(), 32);
  return std::set<std::string>(bus_ids.begin(), bus_ids.end()).size() == bus_ids.size();
}

}  // namespace folio
