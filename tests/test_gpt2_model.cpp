// GPT-2's model structure: the padded vocabulary (llm.c's 50257 -> 50304) changes nothing but
// speed, and the gpt2 presets have GPT-2's sizes.
#include <gtest/gtest.h>

#include <algorithm>

#include "config/presets.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/generate.h"
#include "model/gpt.h"
#include "test_helpers.h"

namespace folio {
namespace {

using testing::TempDir;

std::vector<int32_t> random_tokens(size_t n, int V, uint32_t seed) {
  std::vector<int32_t> tokens(n);
  for (size_t i = 0; i < n; ++i)
    tokens[i] = static_cast<int32_t>(RandomStream{seed, 0, 0, 0}.word(i) % V);
  return tokens;
}

// The values of tensor `name` without its padded rows, from a flat buffer of `model`'s layout.
std::vector<float> saved_part(const GPT& model, const std::vector<float>& flat,
                              const std::string& name) {
  const ParameterTensor& t = model.layout().at(name);
  return {flat.begin() + t.offset, flat.begin() + t.offset + t.saved_size()};
}

std::vector<float> padded_part(const GPT& model, const std::vector<float>& flat,
                               const std::string& name) {
  const ParameterTensor& t = model.layout().at(name);
  return {flat.begin() + t.offset + t.saved_size(), flat.begin() + t.offset + t.size};
}

// Two copies of one model, one with the vocabulary padded: tiny's shape (V = 65) with padding to
// a multiple of 64 (128 rows), untied with biases (tiny) or tied without (nanoGPT's recipe).
struct PaddedPair {
  std::unique_ptr<Backend> backend = make_backend("cpu", 0);
  Config config;
  GPT plain, padded;

  explicit PaddedPair(bool tied)
      : config(make_config(tied, 1)),
        plain(*backend, ModelShape::from_config(config, 65)),
        padded(*backend, ModelShape::from_config(make_config(tied, 64), 65)) {
    plain.initialize(5, 0.2, true);  // large weights: differences would show
    padded.initialize(5, 0.2, true);
  }
  static Config make_config(bool tied, int vocab_padding) {
    Config c = load_config("tiny");
    c.tie_weights = tied;
    c.bias = !tied;
    c.vocab_padding = vocab_padding;
    return c;
  }
  std::vector<std::string> vocabulary_tensors() const {
    std::vector<std::string> names = {"token_embedding_table.weight"};
    if (!config.tie_weights) names.push_back("lm_head.weight");
    if (config.bias) names.push_back("lm_head.bias");
    return names;
  }
  // Fills the padded rows with large values: whatever reads them would change the results.
  void poison_padding() {
    std::vector<float> p = padded.read_parameters();
    for (const std::string& name : vocabulary_tensors()) {
      const ParameterTensor& t = padded.layout().at(name);
      std::fill(p.begin() + t.offset + t.saved_size(), p.begin() + t.offset + t.size, 7.0f);
    }
    padded.write_parameters(p);
  }
};

TEST(PaddedVocabulary, RowsRoundUpAndStartAsTheUnpaddedModelWithZeroPadding) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    PaddedPair pair(tied);
    EXPECT_EQ(pair.padded.shape().padded_vocab_size, 128);
    EXPECT_EQ(pair.plain.shape().padded_vocab_size, 65);
    EXPECT_EQ(pair.padded.layout().at("token_embedding_table.weight").shape,
              (std::vector<int>{128, 32}));
    EXPECT_EQ(pair.padded.parameter_count() - pair.plain.parameter_count(),
              size_t(63) * (tied ? 32 : 2 * 32 + 1));
    const std::vector<float> a = pair.plain.read_parameters(), b = pair.padded.read_parameters();
    for (const ParameterTensor& t : pair.plain.layout().tensors()) {
      EXPECT_EQ(saved_part(pair.plain, a, t.name), saved_part(pair.padded, b, t.name)) << t.name;
      const std::vector<float> padding = padded_part(pair.padded, b, t.name);
      EXPECT_EQ(padding, std::vector<float>(padding.size(), 0.0f)) << t.name;
    }
  }
}

TEST(PaddedVocabulary, LossGradientsAndSamplesEqualTheUnpaddedModels) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    PaddedPair pair(tied);
    pair.poison_padding();
    const int B = 3, T = 16, V = 65;
    const auto tokens = random_tokens(B * T, V, 8), targets = random_tokens(B * T, V, 9);
    const DropoutContext dropout{0.2f, 3, 1, 0};
    for (GPT* model : {&pair.plain, &pair.padded}) {
      model->plan(B, T, true);
      model->forward(tokens.data(), targets.data(), B, T, dropout);
    }
    // lm_head's products run over 128 outputs instead of 65, and oneDNN may block (and so round)
    // the sums differently for the two widths: on an AVX2-only Zen 3 its sgemm left 35 of the
    // 3120 logits a last bit apart (relative error 1.4e-8), where AVX-512's kernels gave equal
    // ones. So logits, loss and gradients are equal to rounding; a read of the padding (7.0 in
    // every padded weight) would move them by far more than 1e-6.
    EXPECT_LT(testing::relative_error(pair.padded.read_logits(), pair.plain.read_logits()), 1e-6);
    for (GPT* model : {&pair.plain, &pair.padded})
      model->backward(1.0f / (B * T), GradientUpdate::kWrite);
    EXPECT_NEAR(pair.padded.mean_loss(), pair.plain.mean_loss(), 1e-6 * pair.plain.mean_loss());
    const std::vector<float> ga = pair.plain.read_gradients(), gb = pair.padded.read_gradients();
    for (const ParameterTensor& t : pair.plain.layout().tensors()) {
      const std::vector<float> a = saved_part(pair.plain, ga, t.name),
                               b = saved_part(pair.padded, gb, t.name);
      EXPECT_LT(testing::relative_error(b, a), 1e-6) << t.name;
      const std::vector<float> padding = padded_part(pair.padded, gb, t.name);
      EXPECT_EQ(padding, std::vector<float>(padding.size(), 0.0f)) << t.name << " padding";
    }
    SamplingOptions options;
    options.max_new_tokens = 40;  // beyond block_size: the cropped recompute too
    const auto sampled = generate(pair.padded, {}, options, 0, nullptr);
    EXPECT_EQ(sampled, generate(pair.plain, {}, options, 0, nullptr));
    EXPECT_LT(*std::max_element(sampled.begin(), sampled.end()), V);
    options.temperature = 0;  // greedy: the padded logits (large, from the poison) never win
    EXPECT_EQ(generate(pair.padded, {1}, options, 0, nullptr),
              generate(pair.plain, {1}, options, 0, nullptr));
  }
}

TEST(PaddedVocabulary, CheckpointsHoldTheRealRowsAndRecordThePadding) {
  TempDir dir;
  PaddedPair pair(false);
  const Vocabulary vocabulary = Vocabulary::from_text(
      U"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?\n ");
  ASSERT_EQ(vocabulary.size(), 70);
  GPT model(*pair.backend, ModelShape::from_config(PaddedPair::make_config(false, 64), 70));
  model.initialize(11, 0.02, false);
  save_checkpoint(dir.file("ckpt.safetensors"), model, PaddedPair::make_config(false, 64),
                  vocabulary, 1, 4.0, 4.0);
  const auto file = SafetensorsFile::read(dir.file("ckpt.safetensors"));
  EXPECT_EQ(file.find("token_embedding_table.weight")->shape, (std::vector<int64_t>{70, 32}));
  EXPECT_EQ(file.find("lm_head.weight")->shape, (std::vector<int64_t>{70, 32}));
  EXPECT_EQ(file.find("lm_head.bias")->shape, (std::vector<int64_t>{70}));
  const LoadedCheckpoint loaded = load_checkpoint(dir.file("ckpt.safetensors"), Config{}, nullptr);
  EXPECT_EQ(loaded.config.vocab_padding, 64);
  EXPECT_EQ(loaded.shape.padded_vocab_size, 128);
  EXPECT_EQ(loaded.parameters->read_all(), model.read_parameters());  // padded rows read back as zeros
}

// GPT-2's parameter count: wte V*C, wpe 1024*C, per block 12C^2 + 13C (ln1, c_attn with its
// bias, c_proj, ln2, c_fc, c_proj of the MLP, all with biases), ln_f 2C; lm_head tied.
size_t gpt2_parameters(size_t V, size_t L, size_t C) {
  return V * C + 1024 * C + L * (12 * C * C + 13 * C) + 2 * C;
}

TEST(Gpt2Presets, HaveGpt2sShapesAndParameterCounts) {
  auto backend = make_backend("cpu", 1);
  struct Expected {
    const char* preset;
    int n_layer, n_head, n_embd;
    size_t parameters;  // GPT-2's, at the 50257-token vocabulary unpadded
  };
  for (const Expected& e :
       {Expected{"gpt2", 12, 12, 768, 124439808}, Expected{"gpt2-medium", 24, 16, 1024, 354823168},
        Expected{"gpt2-large", 36, 20, 1280, 774030080},
        Expected{"gpt2-xl", 48, 25, 1600, 1557611200}}) {
    SCOPED_TRACE(e.preset);
    Config c = load_config(e.preset);
    validate_config(c);
    EXPECT_EQ(gpt2_parameters(50257, e.n_layer, e.n_embd), e.parameters);
    EXPECT_EQ(c.n_layer, e.n_layer);
    EXPECT_EQ(c.n_head, e.n_head);
    EXPECT_EQ(c.n_embd, e.n_embd);
    EXPECT_EQ(c.block_size, 1024);
    EXPECT_EQ(c.activation, "gelu_tanh");
    EXPECT_TRUE(c.bias && c.tie_weights && c.scaled_residual_init);
    EXPECT_EQ(c.vocab_padding, 128);
    // The count from the layout (no memory taken), with GPT-2's c_attn bias (qkv_bias).
    EXPECT_TRUE(c.qkv_bias);
    c.vocab_padding = 1;
    const ParameterLayout plain(ModelShape::from_config(c, 50257));
    EXPECT_EQ(plain.total(), e.parameters);
    // Padded to 50304 rows (llm.c's), tied: 47 more rows of the token embedding.
    c.vocab_padding = 128;
    const ModelShape padded_shape = ModelShape::from_config(c, 50257);
    EXPECT_EQ(padded_shape.padded_vocab_size, 50304);
    EXPECT_EQ(ParameterLayout(padded_shape).total() - plain.total(), size_t(47) * e.n_embd);
  }
}

}  // namespace
}  // namespace folio
