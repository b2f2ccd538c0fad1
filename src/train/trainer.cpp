#include "train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>

#include "core/error.h"
#include "core/text_format.h"
#include "data/batches.h"
#include "io/checkpoint.h"
#include "io/metrics_log.h"
#include "model/generate.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"
#include "train/evaluate.h"

namespace folio {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void prepare_out_dir(const std::string& out_dir) {
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (error || !std::filesystem::is_directory(out_dir))
    throw Error("cannot create out_dir " + out_dir + ": " + error.message());
  if (::access(out_dir.c_str(), W_OK) != 0)
    throw Error("out_dir " + out_dir + " is not writable: pass --out_dir with a folder you own");
}

void print_sample(GPT& model, const Vocabulary& vocabulary, const Config& config,
                  const char* when, uint32_t sample_index) {
  std::cout << "--- sample " << when << " training (" << config.sample_tokens
            << " characters) ---\n";
  SamplingOptions options;
  options.max_new_tokens = config.sample_tokens;
  options.seed = config.seed;
  std::string piece;
  generate(model, {}, options, sample_index, [&](int32_t id) {
    piece.clear();
    vocabulary.append_decoded(piece, id);
    std::cout << piece << std::flush;
  });
  std::cout << "\n--- end of sample ---\n" << std::flush;
}

}  // namespace

TrainResult train(const Config& config, const TextDataset& data, Backend& backend,
                  const std::string& initial_parameters) {
  const Clock::time_point start = Clock::now();
  const ModelShape shape = ModelShape::from_config(config, data.vocabulary.size());
  GPT model(backend, shape);
  if (initial_parameters.empty()) {
    model.initialize(config.seed, config.init_std, config.scaled_residual_init);
  } else {
    const LoadedCheckpoint checkpoint =
        load_checkpoint(initial_parameters, config, &data.vocabulary);
    if (checkpoint.parameters.size() != model.parameter_count() ||
        checkpoint.vocabulary.symbols() != data.vocabulary.symbols())
      throw Error("--init_from " + initial_parameters +
                  ": its structure or vocabulary differs from this run's config and data");
    model.write_parameters(checkpoint.parameters);
  }
  // As the seed: print(sum(p.numel() for p in model.parameters())/1e6, 'M parameters')
  std::cout << shortest_double(static_cast<double>(model.parameter_count()) / 1e6)
            << " M parameters\n";
  std::cout << "device " << backend.description() << "; data " << data.path << ": "
            << data.tokens.size() << " characters, vocabulary " << data.vocabulary.size()
            << ", train " << data.train().size() << ", val " << data.val().size() << "\n"
            << std::flush;

  prepare_out_dir(config.out_dir);
  const std::string checkpoint_path =
      (std::filesystem::path(config.out_dir) / "ckpt.safetensors").string();
  MetricsLog metrics((std::filesystem::path(config.out_dir) / "metrics.jsonl").string(), false);

  const int B = config.batch_size, T = config.block_size;
  model.plan(B, T, /*with_gradients=*/true);
  AdamW optimizer(model, config);
  if (config.sample_tokens > 0) print_sample(model, data.vocabulary, config, "before", 0);

  TrainResult result;
  double best_val_loss = std::numeric_limits<double>::infinity();
  Batch batch(B, T);
  const int64_t tokens_per_step = static_cast<int64_t>(B) * T * config.grad_accum;
  Clock::time_point window_start = Clock::now();
  int window_steps = 0;
  for (int step = 0; step < config.max_iters; ++step) {
    if (step % config.eval_interval == 0 || step == config.max_iters - 1) {
      const SplitLosses losses = estimate_loss(model, data, config, static_cast<uint32_t>(step));
      std::printf("step %d: train loss %.4f, val loss %.4f\n", step, losses.train, losses.val);
      std::fflush(stdout);
      metrics.write({{"type", "eval"}, {"step", step}, {"train_loss", losses.train},
                     {"val_loss", losses.val}, {"time_s", seconds_since(start)},
                     {"tokens", tokens_per_step * step}});
      result.last_train_loss = losses.train;
      result.last_val_loss = losses.val;
      if (losses.val < best_val_loss) {
        best_val_loss = losses.val;
        save_checkpoint(checkpoint_path, model, config, data.vocabulary, step, losses.train,
                        losses.val);
        std::printf("step %d: val loss improved, saved %s\n", step, checkpoint_path.c_str());
      }
      window_start = Clock::now();  // progress timing leaves out the evaluation
      window_steps = 0;
    }

    const double learning_rate = learning_rate_at(config, step);
    const bool log_now = config.log_interval > 0 && (step + 1) % config.log_interval == 0;
    model.zero_gradients();
    double loss = 0.0;
    for (int micro = 0; micro < config.grad_accum; ++micro) {
      const uint32_t first_window = static_cast<uint32_t>(micro * B);
      fill_random_batch(batch, data.train(), config.seed, RandomPurpose::kTrainBatch,
                        static_cast<uint32_t>(step), first_window);
      const DropoutContext dropout{static_cast<float>(config.dropout), config.seed,
                                   static_cast<uint32_t>(step), first_window};
      model.forward(batch.inputs.data(), batch.targets.data(), B, T, dropout);
      model.backward(1.0f / static_cast<float>(tokens_per_step));
      if (log_now) loss += model.mean_loss() / config.grad_accum;
    }
    optimizer.step(learning_rate);
    ++window_steps;
    result.steps = step + 1;

    if (log_now) {
      const double seconds = seconds_since(window_start);
      const double ms_per_step = 1000.0 * seconds / window_steps;
      const double tokens_per_second = tokens_per_step * window_steps / seconds;
      std::printf("iter %d/%d: loss %.4f, lr %.2e, %.1f ms/step, %.0f tokens/s\n", step + 1,
                  config.max_iters, loss, learning_rate, ms_per_step, tokens_per_second);
      std::fflush(stdout);
      metrics.write({{"type", "train"}, {"step", step + 1}, {"loss", loss},
                     {"lr", learning_rate}, {"ms_per_step", ms_per_step},
                     {"tokens_per_s", tokens_per_second}, {"time_s", seconds_since(start)},
                     {"tokens", tokens_per_step * (step + 1)}});
      window_start = Clock::now();
      window_steps = 0;
    }
  }
  result.best_val_loss = best_val_loss;
  result.seconds = seconds_since(start);
  if (config.sample_tokens > 0) print_sample(model, data.vocabulary, config, "after", 1);
  std::printf("trained %d steps in %.1f s; best val loss %.4f (checkpoint %s)\n", result.steps,
              result.seconds, best_val_loss, checkpoint_path.c_str());
  return result;
}

}  // namespace folio
