// The whole GPT on the GPU: against the CPU backend (fp32 tight, bf16 loose), bit-identical
// reruns, a recorded-and-replayed step against the same step issued op by op, and generation's
// key/value cache.
#include <cmath>

#include "config/presets.h"
#include "data/batches.h"
#include "gpu_test_helpers.h"
#include "model/gpt.h"
#include "optim/lr_schedule.h"
#include "train/training_step.h"

namespace folio {
namespace {

using testing::cuda_backend;
using testing::relative_error;

constexpr int kVocab = 65;

class CudaModel : public testing::GpuTest {};

// A model trained step by step through the TrainingStep the trainer uses, on random tokens.
struct Trainee {
  Trainee(std::unique_ptr<Backend> backend_, const Config& config_)
      : backend(std::move(backend_)),
        config(config_),
        model(*backend, ModelShape::from_config(config, kVocab)) {
    model.initialize(config.seed, config.init_std, config.scaled_residual_init);
    training = std::make_unique<TrainingStep>(model, config, one_process);
  }

  void draw_batch(int step) {
    training->draw_batches(step, [&](Batch& batch, uint32_t s, int64_t first_window) {
      fill_random_tokens(batch, config.seed, s, static_cast<uint32_t>(first_window), kVocab);
    });
  }
  // Forward, backward and AdamW on the batch drawn for `step`; draws it unless told otherwise.
  void step(int step, bool draw = true) {
    if (draw) draw_batch(step);
    training->compute_gradients(step, /*measure_loss=*/false);
    training->update(learning_rate_at(config, step));
  }

  std::unique_ptr<Backend> backend;
  Config config;
  GPT model;
  LocalCommunicator one_process;
  std::unique_ptr<TrainingStep> training;
};

Config test_config(const std::string& preset, int batch_size) {
  Config c = load_config(preset);
  c.batch_size = batch_size;
  c.dropout = 0.2;
  c.grad_clip = 1.0;
  c.lr_schedule = "cosine";  // a learning rate that changes every step
  c.warmup_iters = 2;
  c.lr_decay_iters = 20;
  return c;
}

// Largest per-tensor relative error between two flat parameter (or gradient) buffers.
double worst_tensor_error(const GPT& model, const std::vector<float>& a,
                          const std::vector<float>& b) {
  double worst = 0;
  for (const ParameterTensor& t : model.layout().tensors()) {
    const std::vector<float> x(a.begin() + t.offset, a.begin() + t.offset + t.size);
    const std::vector<float> y(b.begin() + t.offset, b.begin() + t.offset + t.size);
    worst = std::max(worst, relative_error(x, y));
  }
  return worst;
}

// One forward and backward pass with dropout on the CPU and on the GPU from the same weights:
// logits, loss and every gradient, then the weights after AdamW. fp32 is held to a tolerance per
// tensor; bf16, whose rounding swamps small tensors' gradients, over all parameters at once.
void compare_with_cpu(const Config& config, const std::string& dtype, double tolerance,
                      double update_tolerance) {
  SCOPED_TRACE(dtype);
  Trainee cpu(make_backend("cpu", 0), config), gpu(cuda_backend(dtype), config);
  cpu.step(0);
  gpu.step(0);
  auto error = [&](const std::vector<float>& a, const std::vector<float>& b) {
    return dtype == "fp32" ? worst_tensor_error(cpu.model, a, b) : relative_error(a, b);
  };
  EXPECT_LT(relative_error(gpu.model.read_logits(), cpu.model.read_logits()), tolerance);
  EXPECT_NEAR(gpu.model.mean_loss() / cpu.model.mean_loss(), 1.0, tolerance);
  EXPECT_LT(error(gpu.model.read_gradients(), cpu.model.read_gradients()), tolerance);
  EXPECT_LT(error(gpu.model.read_parameters(), cpu.model.read_parameters()), update_tolerance);
}

TEST_F(CudaModel, MatchesTheCpuInFp32) {
  // One AdamW step moves a weight by about lr * g / |g|, which turns summation noise in a tiny
  // gradient into a visible difference (README, "What faithful means"): 1e-4 there.
  compare_with_cpu(test_config("tiny", 8), "fp32", 1e-5, 1e-4);
  compare_with_cpu(test_config("shakespeare_char", 2), "fp32", 1e-5, 1e-4);
  compare_with_cpu(test_config("nanogpt_char", 2), "fp32", 1e-5, 1e-4);
}

TEST_F(CudaModel, StaysCloseToTheCpuInBf16) {
  compare_with_cpu(test_config("shakespeare_char", 2), "bf16", 3e-2, 1e-2);
}

TEST_F(CudaModel, RerunsAreBitIdentical) {
  for (const std::string dtype : {"fp32", "bf16"}) {
    const Config c = test_config("shakespeare_char", 4);
    Trainee first(cuda_backend(dtype), c), second(cuda_backend(dtype), c);
    for (int step = 0; step < 3; ++step) {
      first.step(step);
      second.step(step);
    }
    EXPECT_EQ(first.model.read_parameters(), second.model.read_parameters()) << dtype;
  }
}

// A step recorded once and replayed with each step's batch, dropout step and learning rate must
// give the parameters the same steps issued op by op give, to the bit.
TEST_F(CudaModel, ReplayedStepsEqualIssuedSteps) {
  for (const std::string dtype : {"fp32", "bf16"}) {
    SCOPED_TRACE(dtype);
    const Config c = test_config("shakespeare_char", 4);
    Trainee issued(cuda_backend(dtype), c), replayed(cuda_backend(dtype), c);
    constexpr int kSteps = 5;
    for (int step = 0; step < kSteps; ++step) issued.step(step);

    replayed.step(0);  // one step unrecorded first: it sizes the scratch memory
    ASSERT_TRUE(replayed.backend->supports_step_capture());
    replayed.draw_batch(1);
    replayed.training->record(1, learning_rate_at(c, 1));
    for (int step = 1; step < kSteps; ++step) {
      replayed.draw_batch(step);
      replayed.training->replay(step, learning_rate_at(c, step));
    }
    EXPECT_EQ(replayed.model.read_parameters(), issued.model.read_parameters());
  }
}

TEST_F(CudaModel, KeyValueCacheGivesTheLogitsOfAFullForward) {
  for (const std::string dtype : {"fp32", "bf16"}) {
    auto backend = cuda_backend(dtype);
    Config c = load_config("shakespeare_char");
    c.n_layer = 2;
    GPT model(*backend, ModelShape::from_config(c, kVocab));
    model.initialize(3, 0.2, false);
    std::vector<int32_t> tokens(100);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7) % kVocab);
    model.forward(tokens.data(), nullptr, 1, 100, DropoutContext{});
    const std::vector<float> full = model.logits_row(0, 99);
    model.forward(tokens.data(), nullptr, 1, 90, DropoutContext{});
    for (int t = 91; t <= 100; ++t)
      model.forward(tokens.data(), nullptr, 1, t, DropoutContext{}, t - 1);
    EXPECT_LT(relative_error(model.logits_row(0, 99), full), dtype == "fp32" ? 1e-5 : 2e-2)
        << dtype;
  }
}

}  // namespace
}  // namespace folio
