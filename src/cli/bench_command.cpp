// folio bench [--config NAME] [--device cpu|cuda] [--steps N] [--warmup N] [--KEY=VALUE]:
// times full training steps (forward, backward, AdamW) on random tokens and prints one JSON line.
#include <algorithm>
#include <chrono>
#include <iostream>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "cli/commands.h"
#include "config/presets.h"
#include "core/philox.h"
#include "model/gpt.h"
#include "optim/adamw.h"

namespace folio {

namespace {

// Training FLOPs per token (design.md section 4): 6 N for the matrix products of forward and
// backward, plus 12 L T C for attention's two T x T products.
double flops_per_token(const GPT& model) {
  const ModelShape& s = model.shape();
  return 6.0 * static_cast<double>(model.parameter_count()) +
         12.0 * s.n_layer * s.block_size * static_cast<double>(s.attention_width());
}

}  // namespace

int bench_command(Arguments& arguments) {
  if (arguments.take_flag("help")) {
    std::cout << "usage: folio bench [--config NAME|FILE] [--device cpu|cuda|auto] [--steps N] "
                 "[--warmup N] [--threads N] [--KEY=VALUE ...]\n\n"
                 "Times training steps after a warm-up and prints one JSON line: config, "
                 "device, threads, ms_per_step (median), tokens_per_s, gflops.\n";
    return 0;
  }
  const std::string config_name = arguments.take("config").value_or("shakespeare_char");
  int steps = 10, warmup = 2;
  if (auto v = arguments.take("steps")) steps = parse_int_option("steps", *v, 1, 1000000);
  if (auto v = arguments.take("warmup")) warmup = parse_int_option("warmup", *v, 0, 1000000);
  const int vocab_size = 65;  // tiny-Shakespeare's
  Config config = load_config(config_name);
  arguments.apply_config_keys(config, {"config", "steps", "warmup", "help"});
  validate_config(config);

  std::unique_ptr<Backend> backend = make_backend(config.device, config.threads);
  GPT model(*backend, ModelShape::from_config(config, vocab_size));
  model.initialize(config.seed, config.init_std, config.scaled_residual_init);
  const int B = config.batch_size, T = config.block_size;
  model.plan(B, T, true);
  AdamW optimizer(model, config);
  std::vector<int32_t> inputs(size_t(B) * T), targets(size_t(B) * T);
  std::vector<double> step_ms;
  for (int step = 0; step < warmup + steps; ++step) {
    const RandomStream stream = make_stream(config.seed, RandomPurpose::kTrainBatch, step, 0);
    for (size_t i = 0; i < inputs.size(); ++i) {
      inputs[i] = static_cast<int32_t>(stream.word(2 * i) % vocab_size);
      targets[i] = static_cast<int32_t>(stream.word(2 * i + 1) % vocab_size);
    }
    const auto start = std::chrono::steady_clock::now();
    model.zero_gradients();
    for (int micro = 0; micro < config.grad_accum; ++micro) {
      model.forward(inputs.data(), targets.data(), B, T,
                    DropoutContext{static_cast<float>(config.dropout), config.seed,
                                   static_cast<uint32_t>(step), static_cast<uint32_t>(micro * B)});
      model.backward(1.0f / (static_cast<float>(B) * T * config.grad_accum));
    }
    optimizer.step(config.learning_rate);
    model.mean_loss();  // waits for the device
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count();
    if (step >= warmup) step_ms.push_back(ms);
  }
  std::sort(step_ms.begin(), step_ms.end());
  const double median = step_ms[step_ms.size() / 2];
  const double tokens = static_cast<double>(B) * T * config.grad_accum;
  const nlohmann::json line = {
      {"config", config_name},
      {"device", backend->name()},
      {"backend", backend->description()},
      {"threads", backend->threads()},
      {"parameters", model.parameter_count()},
      {"batch_size", B},
      {"block_size", T},
      {"steps", steps},
      {"ms_per_step", median},
      {"ms_per_step_min", step_ms.front()},
      {"tokens_per_s", tokens / (median / 1000.0)},
      {"gflops", flops_per_token(model) * tokens / (median / 1000.0) / 1e9},
  };
  std::cout << line.dump() << std::endl;
  return 0;
}

}  // namespace folio
