#include "train/training_step.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "core/error.h"

namespace folio {

namespace {

// The least a gradient sum begun during the backward pass holds (floats): stretches reported done
// merge while adjacent (block l - 1's matrices lie just before block l's, its vectors likewise)
// until they reach it, as DDP's buckets gather gradients up to bucket_cap_mb. Each sum costs a
// collective's latency and, with Gloo, a handover to its thread: a small model's blocks go in a
// few sums instead of two each (measured: `baby` on 2 ranks of a 2-core EPYC took 60 ms a step
// with two sums a block against 45 with one sum after the pass).
constexpr size_t kBucketFloats = size_t(1) << 20;  // 4 MiB

// The sums over the ranks of the gradients a backward pass has finished, (offset, count)
// stretches, gathered while adjacent into buckets of at least kBucketFloats, each begun as it
// fills. Which sums begin, and in what order, follows from the model's layout and the order of
// its backward pass alone: so every rank begins the same collectives, whether its gradients came
// from one pass or from its batch split across threads (a rank that split had made one sum of
// everything while one that did not made several, and Gloo aborted on their lengths).
class GradientBuckets {
 public:
  GradientBuckets(Communicator& communicator, float* gradients)
      : communicator_(communicator), gradients_(gradients) {}
  // An error after a sum began and before finish() (the backward pass threw): a sum under way
  // (Gloo's thread) reads and writes the gradients, which the unwinding may free next; wait for
  // it here. Its own error, if any, is not the one to report.
  ~GradientBuckets() {
    if (!begun_) return;
    try {
      communicator_.finish_sums();
    } catch (...) {
    }
  }
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;
  void finished(size_t offset, size_t count) {
    auto bucket = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& stretch) {
      return stretch.first == offset + count || stretch.first + stretch.second == offset;
    });
    if (bucket == waiting_.end()) {
      bucket = waiting_.emplace(waiting_.end(), offset, count);
    } else {
      bucket->first = std::min(bucket->first, offset);
      bucket->second += count;
    }
    if (bucket->second < kBucketFloats) return;
    begin(bucket->first, bucket->second);
    waiting_.erase(bucket);
  }
  // Begins what is left, then waits for every sum.
  void finish() {
    for (const auto& [offset, count] : waiting_) begin(offset, count);
    waiting_.clear();
    communicator_.finish_sums();
    begun_ = false;  // all done: nothing for the destructor to wait for
  }

 private:
  void begin(size_t offset, size_t count) {
    begun_ = true;
    communicator_.start_sum_device(gradients_ + offset, count);
  }

  Communicator& communicator_;
  float* gradients_;
  std::vector<std::pair<size_t, size_t>> waiting_;  // done, not yet begun: (offset, count)
  bool begun_ = false;  // a sum began that finish() has not waited for
};

}  // namespace

TrainingStep::TrainingStep(GPT& model, const Config& config, Communicator& communicator)
    : model_(model),
      config_(config),
      communicator_(communicator),
      split_{communicator.world_size(), communicator.rank(), config.batch_size, config.grad_accum},
      optimizer_(model, config),
      micro_batches_(config.grad_accum, Batch(config.batch_size, config.block_size)),
      squared_norm_(model.backend(), sizeof(float)) {
  model.plan(config.batch_size, config.block_size, /*with_gradients=*/true);
  const int ways = config.batch_split == "off"
                       ? 1
                       : model.backend().batch_split_ways(config.batch_size, model.activation_bytes());
  // Share i takes windows B i / ways .. B (i + 1) / ways - 1: shares of B / ways windows, or of
  // one window more and less where the thread count does not divide the batch.
  for (int share = 0; ways > 1 && share < ways; ++share) {
    Share& twin = shares_.emplace_back();
    twin.first_window = config.batch_size * share / ways;
    twin.windows = config.batch_size * (share + 1) / ways - twin.first_window;
    twin.backend = model.backend().make_twin();
    twin.model = std::make_unique<GPT>(*twin.backend, model);
    twin.model->plan(twin.windows, config.block_size, /*with_gradients=*/true);
    twin.model->gradients();  // allocated now: run_batch_split reads their addresses first
  }
}

std::pair<int, int> TrainingStep::batch_split_share_windows() const {
  if (shares_.empty()) return {config_.batch_size, config_.batch_size};
  const auto [fewest, most] = std::minmax_element(
      shares_.begin(), shares_.end(),
      [](const Share& a, const Share& b) { return a.windows < b.windows; });
  return {fewest->windows, most->windows};
}

double TrainingStep::run(uint32_t step, double learning_rate, const BatchFiller& fill,
                         bool measure_loss) {
  draw_batches(step, fill);
  const double loss = compute_gradients(step, measure_loss);
  update(learning_rate);
  return loss;
}

void TrainingStep::draw_batches(uint32_t step, const BatchFiller& fill) {
  for (int micro = 0; micro < split_.grad_accum; ++micro)
    fill(micro_batches_[micro], step, split_.first_window(micro));
}

double TrainingStep::compute_gradients(uint32_t step, bool measure_loss) {
  const double loss = shares_.empty() ? forward_backward(step, measure_loss)
                                      : forward_backward_in_shares(step, measure_loss);
  // Clipping reads the gradients' norm; it is summed once here, and first_non_finite reuses it.
  norm_summed_ = false;
  if (config_.grad_clip > 0) sum_squared_norm();
  if (!measure_loss) return std::numeric_limits<double>::quiet_NaN();
  double global_loss = loss / split_.grad_accum;
  communicator_.all_reduce_sum_host(&global_loss, 1);
  return global_loss / split_.world;
}

double TrainingStep::forward_backward(uint32_t step, bool measure_loss) {
  const int B = config_.batch_size, T = config_.block_size;
  // Several ranks: the last micro-batch's backward pass starts each block's sum over the ranks as
  // it leaves the block, and the blocks below compute while it travels (DDP's buckets).
  const bool overlap = sums_in_buckets();
  GradientBuckets buckets(communicator_, model_.gradients());
  const GPT::GradientsDone start_sum = [&](size_t offset, size_t count) {
    buckets.finished(offset, count);
  };
  double loss = 0.0;
  for (int micro = 0; micro < split_.grad_accum; ++micro) {
    const Batch& batch = micro_batches_[micro];
    const DropoutContext dropout =
        DropoutContext::of(config_, step, static_cast<uint32_t>(split_.first_window(micro)));
    model_.forward(batch.inputs.data(), batch.targets.data(), B, T, dropout);
    // Each position's loss weighs 1 / (all positions of the global batch): summing the ranks'
    // gradients then gives the gradient of the global mean loss.
    // The first micro-batch writes the gradients (no pass zeroing them first), the rest add.
    const bool last = micro + 1 == split_.grad_accum;
    model_.backward(1.0f / (static_cast<float>(split_.global_windows()) * T),
                    micro == 0 ? GradientUpdate::kWrite : GradientUpdate::kAdd,
                    overlap && last ? start_sum : nullptr);
    if (measure_loss) loss += model_.mean_loss();
  }
  if (overlap)
    buckets.finish();
  else
    sum_gradients_over_ranks();
  return loss;
}

// Each share computes its windows of each micro-batch with the dropout those windows have in the
// whole batch (DropoutContext's first_sample): the shares compute what the unsplit passes would,
// and their gradients summed are the batch's, up to the rounding of that one sum (the gradients'
// order of addition within each share's products differs too).
double TrainingStep::forward_backward_in_shares(uint32_t step, bool measure_loss) {
  const int ways = static_cast<int>(shares_.size());
  const int T = config_.block_size;
  std::vector<const float*> parts;
  for (Share& share : shares_) parts.push_back(share.model->gradients());
  const auto pass = [&](int i) {
    Share& share = shares_[static_cast<size_t>(i)];
    // AdamW (or a checkpoint) wrote the parameters on the model's backend since this twin's last
    // pass: its bf16 copy of them, where it keeps one, is out of date.
    share.backend->set_parameter_buffer(model_.parameters(), model_.parameter_count());
    share.loss = 0.0;
    for (int micro = 0; micro < split_.grad_accum; ++micro) {
      const Batch& batch = micro_batches_[micro];
      const size_t first_position = static_cast<size_t>(share.first_window) * T;
      const DropoutContext dropout = DropoutContext::of(
          config_, step, static_cast<uint32_t>(split_.first_window(micro) + share.first_window));
      share.model->forward(batch.inputs.data() + first_position,
                           batch.targets.data() + first_position, share.windows, T, dropout);
      share.model->backward(1.0f / (static_cast<float>(split_.global_windows()) * T),
                            micro == 0 ? GradientUpdate::kWrite : GradientUpdate::kAdd);
      if (measure_loss) share.loss += share.model->mean_loss();
    }
  };
  model_.backend().run_batch_split(ways, pass, model_.gradients(), parts,
                                   model_.parameter_count());
  if (sums_in_buckets()) {
    // The sums an unsplit rank begins during its backward pass, in its order (GradientBuckets):
    // a rank of another thread count may not split.
    GradientBuckets buckets(communicator_, model_.gradients());
    for (const auto& [offset, count] : model_.gradients_in_backward_order())
      buckets.finished(offset, count);
    buckets.finish();
  } else {
    sum_gradients_over_ranks();
  }
  // The micro-batches' mean losses: each share's mean weighs its share of the windows.
  double loss = 0.0;
  for (const Share& share : shares_) loss += share.loss * share.windows;
  return loss / config_.batch_size;
}

bool TrainingStep::sums_in_buckets() const {
  return split_.world > 1 && config_.overlap_gradient_sums;
}

void TrainingStep::sum_gradients_over_ranks() {
  communicator_.all_reduce_sum_device(model_.gradients(), model_.parameter_count());
}

void TrainingStep::sum_squared_norm() {
  model_.backend().sum_of_squares(squared_norm_.as<float>(), model_.gradients(),
                                  model_.parameter_count());
  norm_summed_ = true;
}

std::string TrainingStep::first_non_finite(double loss) {
  if (!norm_summed_) sum_squared_norm();
  float squared_norm = 0.0f;
  model_.backend().copy_to_host(&squared_norm, squared_norm_.get(), sizeof(float));
  if (std::isfinite(squared_norm) && std::isfinite(loss)) return "";
  const std::vector<float> gradients = model_.read_gradients();
  for (const ParameterTensor& tensor : model_.layout().tensors())
    for (size_t i = 0; i < tensor.size; ++i)
      if (!std::isfinite(gradients[tensor.offset + i])) return "the gradient of " + tensor.name;
  return "the loss";
}

void TrainingStep::update(double learning_rate) {
  optimizer_.step(learning_rate, squared_norm_.as<float>());
  // A whole step has run op by op: what it allocates (scratch, bf16 copies) is there now.
  if (!recording_) issued_ = memory_now();
}

TrainingStep::MemoryState TrainingStep::memory_now() const {
  return {model_.plans_made(), model_.backend().device_memory_frees()};
}

void TrainingStep::record(uint32_t step, double learning_rate) {
  Backend& backend = model_.backend();
  if (!backend.supports_step_capture() || communicator_.world_size() != 1)
    throw Error("internal: training steps are recorded on one rank of a backend that records");
  // Recording runs nothing: the optimizer's count of steps taken must not move.
  const int64_t steps_taken = optimizer_.steps_taken();
  backend.begin_step_capture();
  recording_ = true;
  compute_gradients(step, /*measure_loss=*/false);
  update(learning_rate);
  recording_ = false;
  backend.end_step_capture();
  optimizer_.set_steps_taken(steps_taken);
  recorded_ = memory_now();
}

bool TrainingStep::replays() const {
  return config_.cuda_graph && issued_.plan != 0 && communicator_.world_size() == 1 &&
         model_.backend().supports_step_capture();
}

void TrainingStep::replay_or_record(uint32_t step, double learning_rate) {
  if (!replays()) throw Error("internal: replay_or_record() where replays() is false");
  // The recording holds the addresses of the activations and of the backend's scratch memory: a
  // new plan (a forward on a larger batch), or device memory freed since (scratch that an
  // evaluation grew: the old buffer is gone), records again, once a step has run op by op on
  // what is there now. Recording allocates nothing, and the first step on new activations must:
  // the bf16 copies that products read, kept per address, and scratch memory where no copy is
  // kept (on an H200, 2026-11-27, a recording right after a plan threw "growing scratch memory").
  if (recorded_ != memory_now()) {
    if (issued_ != memory_now()) {
      compute_gradients(step, /*measure_loss=*/false);
      update(learning_rate);
      return;
    }
    record(step, learning_rate);
  }
  replay(step, learning_rate);
}

void TrainingStep::replay(uint32_t step, double learning_rate) {
  // The recording's adamw_update reads the step count from the replay's values, not from the
  // optimizer: count it here as AdamW::step would.
  const int64_t adamw_step = optimizer_.steps_taken() + 1;
  model_.backend().replay_step({step, learning_rate, adamw_step});
  optimizer_.set_steps_taken(adamw_step);
}

}  // namespace folio
