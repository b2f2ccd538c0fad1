// One optimizer step of data-parallel training, the body of the seed's loop:
//
//   xb, yb = get_batch('train')
//   logits, loss = model(xb, yb)
//   optimizer.zero_grad(set_to_none=True)
//   loss.backward()
//   optimizer.step()
//
// with grad_accum micro-batches per rank, the gradients summed over the ranks before the update
// (DistributedDataParallel's all-reduce), then clipping and AdamW. The trainer, `folio bench`,
// the CUDA-graph recording and the tests all run their steps through this class, so there is one
// place that says what a step is.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "data/batches.h"
#include "distributed/communicator.h"
#include "model/gpt.h"
#include "optim/adamw.h"

namespace folio {

// Fills `batch` with the global windows first_window .. + batch_size - 1 of step `step`.
using BatchFiller = std::function<void(Batch& batch, uint32_t step, int64_t first_window)>;

class TrainingStep {
 public:
  // Plans the model's activations for training batches (GPT::plan).
  TrainingStep(GPT& model, const Config& config, Communicator& communicator);

  GPT& model() { return model_; }
  AdamW& optimizer() { return optimizer_; }
  const BatchSplit& split() const { return split_; }
  // Into how many shares each micro-batch is split across threads (Backend::batch_split_ways and
  // config key batch_split): 1, or the twins of the model that compute one share each, side by
  // side, their gradients summed into the model's.
  int batch_split_ways() const { return shares_.empty() ? 1 : static_cast<int>(shares_.size()); }
  // The fewest and most windows of a micro-batch one share takes (equal where the shares are).
  std::pair<int, int> batch_split_share_windows() const;
  // The batch of micro-step `micro` as last drawn (host memory).
  const Batch& micro_batch(int micro) const { return micro_batches_.at(micro); }

  // The whole step: draw this rank's micro-batches, forward and backward, sum over the ranks,
  // clip, AdamW. Returns the global mean loss when `measure_loss` (waits for the device; every
  // rank must ask alike, as it is a collective), else NaN.
  double run(uint32_t step, double learning_rate, const BatchFiller& fill,
             bool measure_loss = false);

  // The same, in the pieces the trainer runs separately (it checks the gradients before the
  // update). draw_batches fills one host buffer per micro-batch: a recorded step reads each
  // from its own address.
  void draw_batches(uint32_t step, const BatchFiller& fill);
  double compute_gradients(uint32_t step, bool measure_loss);
  // "" when the loss and every gradient are finite, else what is not ("the loss", "the gradient
  // of blocks.0.sa.proj.weight"). Waits for the device.
  std::string first_non_finite(double loss);
  void update(double learning_rate);

  // CUDA graphs (one rank): record compute_gradients + update once, after one step run op by op
  // (it sizes the scratch memory); each replay redoes them for a new step's batches (drawn with
  // draw_batches first), dropout and learning rate.
  void record(uint32_t step, double learning_rate);
  void replay(uint32_t step, double learning_rate);
  // Whether the step can be recorded here (a backend that records, one rank, cuda_graph) and
  // one has run op by op; then compute_gradients + update for the batches drawn, as a replay of
  // the recording, made first or again when the memory it points at has changed since: the
  // model planned anew, or device memory freed (scratch memory that an evaluation's forward
  // pass grew, a buffer released). After such a change the first step runs op by op instead:
  // the recording may not allocate, and the new activations' bf16 copies and the scratch memory
  // are made by a step that runs.
  bool replays() const;
  void replay_or_record(uint32_t step, double learning_rate);

 private:
  // The one call that sums gradients over the ranks (the communicator knows where the backend's
  // memory is: NCCL on the GPU, Gloo or MPI on the host, staged copies without NCCL).
  void sum_gradients_over_ranks();
  // Whether the sums over the ranks go bucket by bucket (GradientBuckets, begun during the
  // backward pass where it runs whole), or as one sum after it (sum_gradients_over_ranks).
  bool sums_in_buckets() const;
  // compute_gradients' passes and sums over the ranks, with the whole micro-batches on the model,
  // or each split into shares_; both return the sum over micro-batches of their mean losses
  // (when measure_loss).
  double forward_backward(uint32_t step, bool measure_loss);
  double forward_backward_in_shares(uint32_t step, bool measure_loss);
  // squared_norm_ = the sum of the squared gradients (device memory).
  void sum_squared_norm();

  GPT& model_;
  const Config config_;
  Communicator& communicator_;
  const BatchSplit split_;
  AdamW optimizer_;
  std::vector<Batch> micro_batches_;
  struct Share {
    std::unique_ptr<Backend> backend;  // a twin of the model's backend, computing on one thread
    std::unique_ptr<GPT> model;        // a twin of the model on it: its own activations, gradients
    int first_window = 0;              // its windows of each micro-batch: first_window ..
    int windows = 0;                   //   first_window + windows - 1
    double loss = 0.0;                 // the sum of its micro-batches' mean losses, last step
  };
  std::vector<Share> shares_;  // empty: no batch split
  DeviceBuffer squared_norm_;  // the gradients' squared global norm, for clipping and checks
  bool norm_summed_ = false;   // squared_norm_ holds this step's (summed over the ranks) norm
  bool recording_ = false;
  // The memory a step runs on: which plan of the model's activations (GPT::plans_made(), from
  // 1) and how many frees of device memory so far (Backend::device_memory_frees()). Taken after
  // the last step run op by op (which sized the scratch memory for it) and at the recording;
  // plan 0: none yet.
  struct MemoryState {
    uint64_t plan = 0;
    uint64_t device_frees = 0;
    bool operator==(const MemoryState&) const = default;
  };
  MemoryState memory_now() const;
  MemoryState issued_, recorded_;
};

}  // namespace folio
