#include "distributed/staged_communicator.h"

namespace folio {

void StagedCommunicator::all_reduce_sum_device(float* data, size_t n) {
  staging_.resize(n);
  backend_.copy_to_host(staging_.data(), data, n * sizeof(float));
  host_->all_reduce_sum_device(staging_.data(), n);
  backend_.copy_to_device(data, staging_.data(), n * sizeof(float));
}

void StagedCommunicator::broadcast_device(float* data, size_t n) {
  staging_.resize(n);
  backend_.copy_to_host(staging_.data(), data, n * sizeof(float));
  host_->broadcast_device(staging_.data(), n);
  backend_.copy_to_device(data, staging_.data(), n * sizeof(float));
}

}  // namespace folio
