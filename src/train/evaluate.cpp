#include "train/evaluate.h"

#include <algorithm>

#include "data/batches.h"

namespace folio {

std::optional<SplitLosses> estimate_loss_share(GPT& model, const Dataset& data,
                                               const Config& config, uint32_t round, int rank,
                                               int world, const std::function<bool()>& keep_going) {
  const int B = config.batch_size, T = config.block_size;
  const BatchSplit windows{world, rank, B, config.grad_accum};
  Batch batch(B, T);
  SplitLosses sums;
  // Each batch's loss stays on the device until the split is done (GPT::keep_loss_sum): reading
  // it back after every batch left a GPU idle while the host drew and uploaded the next one.
  const size_t batches = size_t(config.eval_iters) * config.grad_accum;
  DeviceBuffer kept(model.backend(), std::max<size_t>(1, batches) * sizeof(float));
  for (int split = 0; split < 2; ++split) {
    const TokenSequence& tokens = split == 0 ? data.train() : data.val();
    const auto purpose = split == 0 ? RandomPurpose::kEvalTrainBatch : RandomPurpose::kEvalValBatch;
    for (int k = 0; k < config.eval_iters; ++k) {
      for (int micro = 0; micro < config.grad_accum; ++micro) {
        const int64_t first = k * windows.global_windows() + windows.first_window(micro);
        fill_random_batch(batch, tokens, config.seed, purpose, round, static_cast<uint32_t>(first));
        model.forward(batch.inputs.data(), batch.targets.data(), B, T, DropoutContext{});
        model.keep_loss_sum(kept.as<float>() + size_t(k) * config.grad_accum + micro);
      }
      if (keep_going && !keep_going()) return std::nullopt;
    }
    double& total = split == 0 ? sums.train : sums.val;  // in the order the batches ran
    if (batches > 0)
      for (float loss : model.mean_losses(kept.as<float>(), batches)) total += loss;
  }
  return sums;
}

double split_loss(GPT& model, const TokenSequence& split, int block_size, int batch_size,
                  size_t max_windows, size_t* windows,
                  const std::function<void(size_t windows_done)>& on_progress) {
  const size_t count = std::min(consecutive_window_count(split.size(), block_size), max_windows);
  Batch batch(batch_size, block_size);
  double total = 0.0;
  for (size_t first = 0; first < count; first += batch_size) {
    const int filled = static_cast<int>(
        std::min<size_t>(fill_consecutive_batch(batch, split, first), count - first));
    model.forward(batch.inputs.data(), batch.targets.data(), filled, block_size, DropoutContext{});
    total += static_cast<double>(model.mean_loss()) * filled;
    if (on_progress) on_progress(first + filled);
  }
  if (windows) *windows = count;
  return count ? total / static_cast<double>(count) : 0.0;
}

}  // namespace folio
