// The GPT as a whole on the CPU backend: sizes, the key/value cache, gradient accumulation with
// dropout, generation and checkpoints. (Numerics against PyTorch: tests/torch/.)
#include <gtest/gtest.h>

#include <cmath>

#include "config/presets.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/generate.h"
#include "model/gpt.h"
#include "test_helpers.h"

namespace folio {
namespace {

using testing::error_message;
using testing::relative_error;
using testing::TempDir;

std::unique_ptr<Backend> cpu() { return make_backend("cpu", 0); }

Config small_config() {
  Config c = load_config("tiny");  // 2 layers, 3 heads of 10, n_embd 32, block 16
  c.dropout = 0.2;
  return c;
}

std::vector<int32_t> random_tokens(size_t n, int V, uint32_t seed) {
  std::vector<int32_t> tokens(n);
  for (size_t i = 0; i < n; ++i)
    tokens[i] = static_cast<int32_t>(RandomStream{seed, 0, 0, 0}.word(i) % V);
  return tokens;
}

TEST(Model, ParameterCountsMatchTheSeedAndNanoGPT) {
  auto backend = cpu();
  GPT seed(*backend, ModelShape::from_config(load_config("shakespeare_char"), 65));
  EXPECT_EQ(seed.parameter_count(), 10788929u);  // seed 000: "10.788929 M parameters"
  GPT nano(*backend, ModelShape::from_config(load_config("nanogpt_char"), 65));
  // nanoGPT prints 10.65M, which leaves out the 98,304 position-embedding parameters.
  EXPECT_EQ(nano.parameter_count(), 10745088u);
  EXPECT_EQ(nano.parameter_count() - 256 * 384, 10646784u);
}

TEST(Model, InitialLossIsNearLogVocabulary) {
  auto backend = cpu();
  const Config c = small_config();
  GPT model(*backend, ModelShape::from_config(c, 65));
  model.initialize(c.seed, c.init_std, c.scaled_residual_init);
  const auto tokens = random_tokens(4 * 16, 65, 1), targets = random_tokens(4 * 16, 65, 2);
  model.forward(tokens.data(), targets.data(), 4, 16, DropoutContext{});
  EXPECT_NEAR(model.mean_loss(), std::log(65.0), 0.05);
}

TEST(Model, InitialisationFollowsTheRecipe) {
  auto backend = cpu();
  Config c = load_config("nanogpt_char");
  c.n_layer = 2;
  GPT model(*backend, ModelShape::from_config(c, 65));
  model.initialize(7, 0.02, true);
  const std::vector<float> p = model.read_parameters();
  auto stddev = [&](const std::string& name) {
    const ParameterTensor& t = model.layout().at(name);
    double sum = 0, squares = 0;
    for (size_t i = 0; i < t.size; ++i) sum += p[t.offset + i], squares += p[t.offset + i] * p[t.offset + i];
    const double mean = sum / t.size;
    return std::sqrt(squares / t.size - mean * mean);
  };
  EXPECT_NEAR(stddev("blocks.0.ffwd.net.0.weight"), 0.02, 0.0005);
  EXPECT_NEAR(stddev("blocks.0.sa.proj.weight"), 0.02 / std::sqrt(4.0), 0.0005);
  EXPECT_NEAR(stddev("blocks.1.ffwd.net.2.weight"), 0.02 / std::sqrt(4.0), 0.0005);
  EXPECT_EQ(p[model.layout().at("ln_f.weight").offset], 1.0f);
}

TEST(Model, KeyValueCacheGivesTheLogitsOfAFullForward) {
  auto backend = cpu();
  const Config c = small_config();
  GPT model(*backend, ModelShape::from_config(c, 65));
  model.initialize(3, 0.2, false);  // larger weights make differences visible
  const auto tokens = random_tokens(16, 65, 4);
  model.forward(tokens.data(), nullptr, 1, 16, DropoutContext{});
  const std::vector<float> full = model.logits_row(0, 15);
  model.forward(tokens.data(), nullptr, 1, 9, DropoutContext{});
  for (int t = 10; t <= 16; ++t) model.forward(tokens.data(), nullptr, 1, t, DropoutContext{}, t - 1);
  EXPECT_LT(relative_error(model.logits_row(0, 15), full), 1e-6);
}

TEST(Model, MicroBatchesAccumulateTheGradientOfTheWholeBatchWithDropout) {
  auto backend = cpu();
  const Config c = small_config();
  const int B = 4, T = 16;
  const auto tokens = random_tokens(B * T, 65, 5), targets = random_tokens(B * T, 65, 6);
  GPT model(*backend, ModelShape::from_config(c, 65));
  model.initialize(c.seed, c.init_std, false);
  model.plan(B, T, true);
  model.zero_gradients();
  model.forward(tokens.data(), targets.data(), B, T, DropoutContext{0.2f, 9, 3, 0});
  model.backward(1.0f / (B * T));
  const std::vector<float> whole = model.read_gradients();
  model.zero_gradients();
  for (int half = 0; half < 2; ++half) {
    const size_t offset = size_t(half) * (B / 2) * T;
    model.forward(tokens.data() + offset, targets.data() + offset, B / 2, T,
                  DropoutContext{0.2f, 9, 3, static_cast<uint32_t>(half * B / 2)});
    model.backward(1.0f / (B * T));
  }
  EXPECT_LT(relative_error(model.read_gradients(), whole), 1e-5);
  // And dropout really was on: another step's masks give other gradients.
  model.zero_gradients();
  model.forward(tokens.data(), targets.data(), B, T, DropoutContext{0.2f, 9, 4, 0});
  model.backward(1.0f / (B * T));
  EXPECT_GT(relative_error(model.read_gradients(), whole), 1e-3);
}

TEST(Model, GenerationIsDeterministicPerSeed) {
  auto backend = cpu();
  const Config c = small_config();
  GPT model(*backend, ModelShape::from_config(c, 65));
  model.initialize(c.seed, 0.5, false);
  SamplingOptions options;
  options.max_new_tokens = 40;  // beyond block_size 16: exercises the cropped recompute too
  const auto a = generate(model, {}, options, 0, nullptr);
  const auto b = generate(model, {}, options, 0, nullptr);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 41u);
  options.seed = 1338;
  EXPECT_NE(generate(model, {}, options, 0, nullptr), a);
  options.temperature = 0;  // greedy: no randomness at all
  EXPECT_EQ(generate(model, {1, 2}, options, 0, nullptr), generate(model, {1, 2}, options, 5, nullptr));
}

TEST(Sampling, TopKAndTopPCutTheTail) {
  const std::vector<float> logits = {0.0f, 3.0f, 2.0f, -1.0f, 2.9f};
  SamplingOptions options;
  options.top_k = 1;
  for (uint64_t w : {0ULL, ~0ULL, 12345678901234ULL}) EXPECT_EQ(sample_from_logits(logits, options, w), 1);
  options.top_k = 0;
  options.top_p = 0.5;  // token 1 alone has p ~ 0.43, so tokens 1 and 4 make the nucleus
  for (uint64_t i = 0; i < 200; ++i) {
    const int32_t id = sample_from_logits(logits, options, RandomStream{1, 2, 3, 4}.word64(i));
    EXPECT_TRUE(id == 1 || id == 4) << id;
  }
}

TEST(Checkpoint, RoundTripsWeightsConfigAndVocabulary) {
  TempDir dir;
  auto backend = cpu();
  const Config c = small_config();
  const Vocabulary vocabulary = Vocabulary::from_text(U"abcdefghij");
  GPT model(*backend, ModelShape::from_config(c, vocabulary.size()));
  model.initialize(11, 0.02, false);
  save_checkpoint(dir.file("ckpt.safetensors"), model, c, vocabulary, 42, 2.5, 2.75);
  const LoadedCheckpoint loaded = load_checkpoint(dir.file("ckpt.safetensors"), Config{}, nullptr);
  EXPECT_TRUE(loaded.written_by_folio);
  EXPECT_EQ(loaded.step, 42);
  EXPECT_DOUBLE_EQ(loaded.val_loss, 2.75);
  EXPECT_EQ(loaded.vocabulary.symbols(), vocabulary.symbols());
  EXPECT_EQ(loaded.config.head_size, 10);
  EXPECT_EQ(loaded.parameters, model.read_parameters());
  // The per-head names of the seed are in the file.
  const auto file = SafetensorsFile::read(dir.file("ckpt.safetensors"));
  EXPECT_NE(file.find("blocks.1.sa.heads.2.value.weight"), nullptr);
  EXPECT_EQ(file.find("blocks.1.sa.heads.2.value.weight")->shape, (std::vector<int64_t>{10, 32}));
  EXPECT_EQ(file.find("blocks.0.sa.proj.weight")->shape, (std::vector<int64_t>{32, 30}));
}

TEST(Checkpoint, ForeignFilesNeedAVocabularyAndAMatchingStructure) {
  TempDir dir;
  auto backend = cpu();
  const Config c = small_config();
  const Vocabulary vocabulary = Vocabulary::from_text(U"abcdefghij");
  GPT model(*backend, ModelShape::from_config(c, vocabulary.size()));
  model.initialize(11, 0.02, false);
  save_checkpoint(dir.file("ckpt.safetensors"), model, c, vocabulary, 1, 1, 1);
  // Strip folio's metadata, as a file written by safetensors.torch.save_file would be.
  const auto file = SafetensorsFile::read(dir.file("ckpt.safetensors"));
  std::vector<std::vector<float>> values;
  std::vector<TensorToWrite> tensors;
  for (const auto& t : file.tensors()) values.push_back(file.to_float32(t));
  for (size_t i = 0; i < file.tensors().size(); ++i)
    tensors.push_back({file.tensors()[i].name, file.tensors()[i].shape, values[i].data()});
  write_safetensors(dir.file("torch.safetensors"), tensors, {});
  EXPECT_NE(error_message([&] { load_checkpoint(dir.file("torch.safetensors"), Config{}, nullptr); })
                .find("pass --data FILE"),
            std::string::npos);
  const LoadedCheckpoint loaded = load_checkpoint(dir.file("torch.safetensors"), Config{}, &vocabulary);
  EXPECT_FALSE(loaded.written_by_folio);
  EXPECT_EQ(loaded.config.n_layer, 2);
  EXPECT_EQ(loaded.config.n_head, 3);
  EXPECT_EQ(loaded.config.head_size, 10);
  EXPECT_EQ(loaded.config.block_size, 16);
  EXPECT_EQ(loaded.parameters, model.read_parameters());
  const Vocabulary other = Vocabulary::from_text(U"abc");
  EXPECT_NE(error_message([&] { load_checkpoint(dir.file("torch.safetensors"), Config{}, &other); })
                .find("token embeddings, but the vocabulary has 3"),
            std::string::npos);
  // A tensor with the wrong shape names itself.
  size_t matrix = 0;
  while (tensors[matrix].name != "blocks.0.ffwd.net.0.weight") ++matrix;
  tensors[matrix].shape = {static_cast<int64_t>(values[matrix].size())};
  write_safetensors(dir.file("bad.safetensors"), tensors, {});
  const std::string message =
      error_message([&] { load_checkpoint(dir.file("bad.safetensors"), Config{}, &vocabulary); });
  EXPECT_NE(message.find("has shape"), std::string::npos) << message;
}

}  // namespace
}  // namespace folio
