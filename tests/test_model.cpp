// The GPT as a whole on the CPU backend: sizes, the key/value cache, gradient accumulation with
// dropout, generation and checkpoints. (Numerics against PyTorch: tests/torch/.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <set>

#include "backend/cpu/vector_math.h"
#include "backend/profiling_backend.h"
#include "config/presets.h"
#include "io/checkpoint.h"
#include "io/checkpoint_summary.h"
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

// A model under test and a reference with the same weights (seed, init_std and c's init scheme),
// each with its own activations and key/value cache: what one computes from its cache, the other
// computes in full.
struct ModelAndReference {
  GPT model, reference;
  ModelAndReference(Backend& backend, const Config& c, int vocab, uint64_t seed, double init_std)
      : model(backend, ModelShape::from_config(c, vocab)), reference(backend, model.shape()) {
    model.initialize(seed, init_std, false, init_scheme_of(c));
    reference.initialize(seed, init_std, false, init_scheme_of(c));
  }
};

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

TEST(Model, TorchDefaultInitHasPyTorchsDistributions) {
  // nn.Linear: weight and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)); nn.Embedding N(0, 1);
  // nn.LayerNorm 1 and 0. The fan-ins are written out here, not read from the layout: seed 004's
  // proj reads the 30-wide concatenation of its heads, not the 32-wide stream.
  auto backend = cpu();
  const Config c = load_config("seed004");
  GPT model(*backend, ModelShape::from_config(c, 65));
  model.initialize(c.seed, c.init_std, c.scaled_residual_init, init_scheme_of(c));
  const std::vector<float> p = model.read_parameters();
  struct Moments {
    double mean, variance, largest;
    size_t n;
  };
  auto moments = [&](const std::string& name) {
    const ParameterTensor& t = model.layout().at(name);
    double sum = 0, squares = 0, largest = 0;
    for (size_t i = 0; i < t.size; ++i) {
      const double x = p[t.offset + i];
      sum += x, squares += x * x, largest = std::max(largest, std::abs(x));
    }
    return Moments{sum / t.size, squares / t.size - (sum / t.size) * (sum / t.size), largest,
                   t.size};
  };
  const std::vector<std::pair<std::string, int>> linear = {{"blocks.0.sa.qkv.weight", 32},
                                                           {"blocks.1.sa.qkv.bias", 32},
                                                           {"blocks.0.sa.proj.weight", 30},
                                                           {"blocks.1.sa.proj.bias", 30},
                                                           {"blocks.0.ffwd.net.0.weight", 32},
                                                           {"blocks.1.ffwd.net.0.bias", 32},
                                                           {"blocks.1.ffwd.net.2.weight", 128},
                                                           {"blocks.0.ffwd.net.2.bias", 128},
                                                           {"lm_head.weight", 32},
                                                           {"lm_head.bias", 32}};
  for (const auto& [name, fan_in] : linear) {
    const double bound = 1.0 / std::sqrt(fan_in);
    const Moments m = moments(name);
    // Every value inside the bound, the largest near it (of n uniform draws the largest |x| falls
    // short of the bound by more than 10/n of it with probability e^-10); the uniform's moments
    // (variance bound^2 / 3) within five standard errors.
    EXPECT_LE(m.largest, bound) << name;
    EXPECT_GE(m.largest, bound * (1.0 - 10.0 / m.n)) << name;
    EXPECT_NEAR(m.mean, 0.0, 5 * bound / std::sqrt(3.0 * m.n)) << name;
    EXPECT_NEAR(m.variance, bound * bound / 3, 5 * bound * bound * 0.3 / std::sqrt(m.n)) << name;
  }
  for (const char* name : {"token_embedding_table.weight", "position_embedding_table.weight"}) {
    const Moments m = moments(name);  // N(0, 1): 2080 and 512 values
    EXPECT_NEAR(m.mean, 0.0, 5 / std::sqrt(m.n)) << name;
    EXPECT_NEAR(m.variance, 1.0, 5 * std::sqrt(2.0 / m.n)) << name;
    EXPECT_GT(m.largest, 2.5) << name;  // a normal's tail, which a uniform of variance 1 lacks
  }
  for (const char* name : {"blocks.0.ln1.weight", "blocks.1.ln2.weight", "ln_f.weight"})
    EXPECT_EQ(moments(name).mean, 1.0) << name;
  for (const char* name : {"blocks.0.ln1.bias", "blocks.1.ln2.bias", "ln_f.bias"})
    EXPECT_EQ(moments(name).largest, 0.0) << name;
  // Deterministic in the seed.
  GPT again(*backend, model.shape());
  again.initialize(c.seed, c.init_std, false, InitScheme::kTorchDefault);
  EXPECT_EQ(again.read_parameters(), p);
}

TEST(Model, KeyValueCacheGivesTheLogitsOfAFullForwardAtEveryPosition) {
  // Tokens fed one at a time, each forward computing only the new row. Before each, every other
  // position of the token buffer is overwritten: only the cached keys and values of the earlier
  // rows can still give the original sequence's logits; a full recompute would see other tokens.
  // The seed's block and seed 004's (post_norm, qkv_bias, PyTorch's init).
  auto backend = cpu();
  for (const Config& c : {small_config(), load_config("seed004")}) {
    const int T = c.block_size, V = 65;
    ModelAndReference twins(*backend, c, V, 3, 0.2);  // larger weights show differences
    auto& [model, reference] = twins;
    const auto tokens = random_tokens(T, V, 4);
    reference.forward(tokens.data(), nullptr, 1, T, DropoutContext{});
    const std::vector<float> full = reference.read_logits();  // (1, T, V)
    for (int t = 1; t <= T; ++t) {
      std::vector<int32_t> fed = random_tokens(T, V, 100 + t);
      fed[t - 1] = tokens[t - 1];
      model.forward(fed.data(), nullptr, 1, t, DropoutContext{}, t - 1);
      const std::vector<float> expected(full.begin() + (t - 1) * V, full.begin() + t * V);
      EXPECT_LT(relative_error(model.logits_row(0, t - 1), expected), 1e-6)
          << c.block_order << ", position " << t - 1;
    }
  }
}

TEST(Model, TheLastRowAloneGivesAFullForwardsLastLogitsAndFillsTheCache) {
  // Generation's forward (last_logits_only) computes its last block past the keys and values for
  // row T-1 alone. Its logits of row T-1 must be a full forward's, for a whole window (a prompt,
  // or a window cropped past block_size) and for new rows after cached ones; and the keys and
  // values it wrote for the other rows must serve the next tokens, fed one at a time.
  auto backend = cpu();
  for (const Config& c : {small_config(), load_config("seed004")}) {
    const int T = c.block_size, V = 65;
    ModelAndReference twins(*backend, c, V, 3, 0.2);
    auto& [model, reference] = twins;
    const auto tokens = random_tokens(T, V, 4);
    reference.forward(tokens.data(), nullptr, 1, T, DropoutContext{});
    const std::vector<float> full = reference.read_logits();  // (1, T, V)
    const auto row_of_full = [&](int t) {
      return std::vector<float>(full.begin() + t * V, full.begin() + (t + 1) * V);
    };
    model.forward(tokens.data(), nullptr, 1, T, DropoutContext{}, 0, /*last_logits_only=*/true);
    EXPECT_LT(relative_error(model.logits_row(0, T - 1), row_of_full(T - 1)), 1e-6)
        << c.block_order << ", a whole window";
    const int prompt = T / 2;
    model.forward(tokens.data(), nullptr, 1, prompt, DropoutContext{}, 0, true);
    EXPECT_LT(relative_error(model.logits_row(0, prompt - 1), row_of_full(prompt - 1)), 1e-6)
        << c.block_order << ", a prompt";
    model.forward(tokens.data(), nullptr, 1, prompt + 3, DropoutContext{}, prompt, true);
    EXPECT_LT(relative_error(model.logits_row(0, prompt + 2), row_of_full(prompt + 2)), 1e-6)
        << c.block_order << ", three rows after the cached prompt";
    for (int t = prompt + 4; t <= T; ++t) {
      model.forward(tokens.data(), nullptr, 1, t, DropoutContext{}, t - 1, true);
      EXPECT_LT(relative_error(model.logits_row(0, t - 1), row_of_full(t - 1)), 1e-6)
          << c.block_order << ", position " << t - 1 << " from the cache";
    }
    // Those forwards wrote one row of logits (at the buffer's start): no other row to read.
    EXPECT_NE(error_message([&] { model.read_logits(); }).find("last row's logits alone"),
              std::string::npos);
    EXPECT_NE(error_message([&] { model.logits_row(0, 0); }).find("no logits for row 0"),
              std::string::npos);
    model.forward(tokens.data(), nullptr, 1, T, DropoutContext{});  // a whole forward again
    EXPECT_LT(relative_error(model.read_logits(), full), 1e-6) << c.block_order;
  }
}

TEST(Model, NextTokensOfSeveralTextsAreEachTextsOwnForward) {
  // Generation of several texts at once: a prompt computed in text 0's place and copied to the
  // others, then one pass a position for all the texts, each fed its own token. Each text's logits
  // must be a full forward's over its own tokens, at every position: a text that read another's
  // cache, or a row written to the wrong place, would see other tokens. The seed's block, seed
  // 004's (post_norm), and heads of 32 (bf16 attention, whose cache the CPU keeps as bf16).
  Config wider = small_config();
  wider.n_embd = 64;
  wider.n_head = 2;
  wider.head_size = 32;
  wider.block_size = 24;
  struct Case {
    Config config;
    std::string dtype;
    double tolerance;  // bf16: the same roundings, the products' sums over other row counts
  };
  for (const Case& k : {Case{small_config(), "fp32", 1e-5}, Case{load_config("seed004"), "fp32",
                        1e-5}, Case{wider, "fp32", 1e-5}, Case{wider, "bf16", 1e-2}}) {
    const Config& c = k.config;
    SCOPED_TRACE(c.block_order + ", head_size " + std::to_string(c.head_size) + ", " + k.dtype);
    auto backend = make_backend("cpu", 0, BackendOptions{k.dtype});
    const int T = c.block_size, V = 65, texts = 3, prompt = T / 2;
    ModelAndReference twins(*backend, c, V, 3, 0.2);
    auto& [model, reference] = twins;
    std::vector<std::vector<int32_t>> tokens;
    std::vector<std::vector<float>> full;  // (T, V) each
    for (int i = 0; i < texts; ++i) {
      tokens.push_back(random_tokens(T, V, 4));  // the same prompt ...
      const auto own = random_tokens(T, V, 50 + i);
      std::copy(own.begin() + prompt, own.end(), tokens.back().begin() + prompt);  // ... own ends
      reference.forward(tokens.back().data(), nullptr, 1, T, DropoutContext{});
      full.push_back(reference.read_logits());
    }
    const auto row_of_full = [&](int i, int t) {
      return std::vector<float>(full[i].begin() + t * V, full[i].begin() + (t + 1) * V);
    };
    model.plan_texts(texts);
    model.forward(tokens[0].data(), nullptr, 1, prompt, DropoutContext{}, 0, true);
    for (int i = 1; i < texts; ++i) model.copy_cached_rows(0, i, prompt);
    for (int t = prompt; t < T; ++t) {
      const std::vector<int32_t> next = {tokens[0][t], tokens[1][t], tokens[2][t]};
      model.forward_next_tokens(next.data(), texts, t);
      for (int i = 0; i < texts; ++i)
        EXPECT_LT(relative_error(model.logits_row(i, 0), row_of_full(i, t)), k.tolerance)
            << "text " << i << ", position " << t;
    }
  }
}

TEST(Model, MicroBatchesAccumulateTheGradientOfTheWholeBatchWithDropout) {
  auto backend = cpu();
  const Config c = small_config();
  const int B = 4, T = 16;
  const auto tokens = random_tokens(B * T, 65, 5), targets = random_tokens(B * T, 65, 6);
  GPT model(*backend, ModelShape::from_config(c, 65));
  model.initialize(c.seed, c.init_std, false);
  model.plan(B, T, true);
  model.forward(tokens.data(), targets.data(), B, T, DropoutContext{0.2f, 9, 3, 0});
  model.backward(1.0f / (B * T), GradientUpdate::kWrite);
  const std::vector<float> whole = model.read_gradients();
  // As a training step runs its micro-batches: the first writes the gradients, the next adds.
  for (int half = 0; half < 2; ++half) {
    const size_t offset = size_t(half) * (B / 2) * T;
    model.forward(tokens.data() + offset, targets.data() + offset, B / 2, T,
                  DropoutContext{0.2f, 9, 3, static_cast<uint32_t>(half * B / 2)});
    model.backward(1.0f / (B * T), half == 0 ? GradientUpdate::kWrite : GradientUpdate::kAdd);
  }
  EXPECT_LT(relative_error(model.read_gradients(), whole), 1e-5);
  // And dropout really was on: another step's masks give other gradients.
  model.forward(tokens.data(), targets.data(), B, T, DropoutContext{0.2f, 9, 4, 0});
  model.backward(1.0f / (B * T), GradientUpdate::kWrite);
  EXPECT_GT(relative_error(model.read_gradients(), whole), 1e-3);
}

// backward(.., kWrite) writes some gradients with the products and zeroes the rest first (the
// LayerNorms', the embeddings'): whatever the gradients held before, it must give exactly what
// zeroing them all and adding gives, in every model variant (a tied lm_head shares the token
// embedding's gradient; post_norm and biases add tensors) and in fp32 and bf16.
// backward()'s `done` hears of every tensor's gradient exactly once, and only once the pass has
// written it for the last time: what each stretch holds when it is reported must be what it
// holds when backward() returns (data parallelism starts summing it then). With kAdd on top of an
// earlier pass, so that a stretch reported too early (before its last addition) differs; tied
// embeddings (the token embedding's gradient gets the lm_head's part first and the embedding's
// last), seed 004's post_norm blocks, no biases; blocks reported from the last to the first.
TEST(Model, BackwardReportsEachGradientOnceAndOnlyWhenItIsFinal) {
  Config tied = small_config(), post_norm = load_config("seed004"), no_biases = small_config();
  tied.tie_weights = true;
  no_biases.bias = false;
  no_biases.lm_head_bias = false;
  auto backend = cpu();
  for (const Config* c : {&tied, &post_norm, &no_biases}) {
    SCOPED_TRACE(std::string("tied ") + std::to_string(c->tie_weights) + ", " + c->block_order +
                 ", bias " + std::to_string(c->bias));
    const int B = 2, T = c->block_size;
    GPT model(*backend, ModelShape::from_config(*c, 65));
    model.initialize(c->seed, c->init_std, false);
    model.plan(B, T, true);
    const auto tokens = random_tokens(B * T, 65, 3), targets = random_tokens(B * T, 65, 4);
    model.forward(tokens.data(), targets.data(), B, T, DropoutContext{0.2f, 9, 1, 0});
    model.backward(1.0f / (B * T), GradientUpdate::kWrite);
    model.forward(tokens.data(), targets.data(), B, T, DropoutContext{0.2f, 9, 2, 0});
    const size_t total = model.parameter_count();
    std::vector<int> times_reported(total, 0);
    std::vector<float> when_reported(total, NAN);
    std::vector<int> block_order;
    model.backward(1.0f / (B * T), GradientUpdate::kAdd, [&](size_t offset, size_t count) {
      ASSERT_LE(offset + count, total);
      const std::vector<float> now = model.read_gradients();
      for (size_t i = offset; i < offset + count; ++i) {
        ++times_reported[i];
        when_reported[i] = now[i];
      }
      for (const ParameterTensor& tensor : model.layout().tensors()) {
        if (tensor.offset != offset || tensor.name.rfind("blocks.", 0) != 0) continue;
        const int block = std::stoi(tensor.name.substr(7));  // each block: two stretches
        if (block_order.empty() || block_order.back() != block) block_order.push_back(block);
      }
    });
    EXPECT_EQ(std::count(times_reported.begin(), times_reported.end(), 1), long(total))
        << "every gradient reported exactly once";
    const std::vector<float> final_gradients = model.read_gradients();
    for (const ParameterTensor& tensor : model.layout().tensors())
      for (size_t i = tensor.offset; i < tensor.offset + tensor.size; ++i)
        if (when_reported[i] != final_gradients[i]) {
          ADD_FAILURE() << tensor.name << " was reported before its last write";
          break;
        }
    std::vector<int> last_to_first;
    for (int l = c->n_layer - 1; l >= 0; --l) last_to_first.push_back(l);
    EXPECT_EQ(block_order, last_to_first);
  }
}

TEST(Model, WritingTheGradientsEqualsZeroingThemAndAdding) {
  Config tied = small_config(), post_norm = load_config("seed004"), no_biases = small_config();
  tied.tie_weights = true;
  no_biases.bias = false;
  no_biases.lm_head_bias = false;
  for (const char* dtype : {"fp32", "bf16"}) {
    auto backend = make_backend("cpu", 0, BackendOptions{dtype});
    for (const Config* c : {&tied, &post_norm, &no_biases}) {
      SCOPED_TRACE(std::string(dtype) + ", tied " + std::to_string(c->tie_weights) + ", " +
                   c->block_order + ", bias " + std::to_string(c->bias));
      const int B = 2, T = c->block_size;
      GPT model(*backend, ModelShape::from_config(*c, 65));
      model.initialize(c->seed, c->init_std, false);
      model.plan(B, T, true);
      const auto tokens = random_tokens(B * T, 65, 3), targets = random_tokens(B * T, 65, 4);
      auto pass = [&](uint32_t step, GradientUpdate update) {
        model.forward(tokens.data(), targets.data(), B, T, DropoutContext{0.2f, 9, step, 0});
        model.backward(1.0f / (B * T), update);
      };
      model.zero_gradients();
      pass(1, GradientUpdate::kAdd);
      const std::vector<float> from_zero = model.read_gradients();
      pass(2, GradientUpdate::kAdd);  // the gradients now hold two steps' worth
      ASSERT_NE(model.read_gradients(), from_zero);
      pass(1, GradientUpdate::kWrite);
      EXPECT_EQ(model.read_gradients(), from_zero);
    }
  }
}

// The bf16 CPU backend, except that it keeps no tensor as bf16 alone: the plan then keeps them
// all in fp32, as it did before ProductOperand.
class Bf16ProductsOnFp32Tensors : public ProfilingBackend {
 public:
  using ProfilingBackend::ProfilingBackend;
  bool keeps_as_bf16(ProductOperand, int) const override { return false; }
};

// With bf16 products, the activations that products alone read (ProductOperand: a ReLU model's fc,
// qkv where attention runs on bf16 products, att) are kept as the bf16 values those products
// read. The training plan must shrink by half of each such tensor, and the step must not change
// by a bit: the losses, each layer's fc (the bf16 rounding of the fp32 one) and all gradients.
// Heads of 10 (fp32 attention: fc alone kept) and of 32 (bf16 attention where the CPU has
// AVX512-BF16 or AMX: qkv and att too); two passes with different dropout masks; then the same
// model generates, its key/value cache in the kept qkv.
TEST(Model, KeepingProductOperandsAsBf16ChangesNoBitOfTheStep) {
  Config small = small_config(), wider = small_config();
  wider.n_embd = 64;
  wider.n_head = 2;
  wider.head_size = 32;
  wider.block_size = 32;
  for (const Config* c : {&small, &wider}) {
    SCOPED_TRACE("head_size " + std::to_string(c->head_size));
    auto kept = make_backend("cpu", 0, BackendOptions{"bf16"});
    Bf16ProductsOnFp32Tensors in_fp32(make_backend("cpu", 0, BackendOptions{"bf16"}));
    const ModelShape shape = ModelShape::from_config(*c, 65);
    GPT as_bf16(*kept, shape), as_fp32(in_fp32, shape);
    const int B = 3, T = c->block_size;
    for (GPT* model : {&as_bf16, &as_fp32}) {
      model->initialize(c->seed, c->init_std, false);
      model->plan(B, T, true);
    }
    ASSERT_TRUE(kept->keeps_as_bf16(ProductOperand::kReluOutput, c->head_size));
    const bool attention_kept = kept->keeps_as_bf16(ProductOperand::kQkv, c->head_size);
    EXPECT_EQ(kept->keeps_as_bf16(ProductOperand::kAttentionOutput, c->head_size), attention_kept);
    EXPECT_FALSE(c->head_size == 10 && attention_kept) << "no bf16 attention for heads of 10";
    const double rows = double(B) * T, A = shape.attention_width(), C = shape.n_embd;
    // fc, qkv and att where attention is bf16, and the ln1 and ln2 outputs, which a model this
    // small keeps rather than recomputes (Backend::keeps_recomputable_activations)
    ASSERT_TRUE(kept->keeps_recomputable_activations(as_bf16.activation_bytes()));
    const double saved_per_layer =
        rows * (shape.hidden_width() + (attention_kept ? 4 * A : 0) + 2 * C) * 2;
    // and the new rows of generation's texts, stored as qkv and att are (next_qkv, next_att)
    const double saved_next_rows = attention_kept ? B * 4 * A * 2 : 0.0;
    EXPECT_NEAR(double(as_fp32.activation_bytes()) - double(as_bf16.activation_bytes()),
                c->n_layer * saved_per_layer + saved_next_rows,
                (c->n_layer * 3 + 2) * 256.0);  // the plan aligns to 256
    const auto tokens = random_tokens(B * T, 65, 7), targets = random_tokens(B * T, 65, 8);
    for (uint32_t step : {1u, 2u}) {
      for (GPT* model : {&as_bf16, &as_fp32})
        model->forward(tokens.data(), targets.data(), B, T, DropoutContext{0.2f, 9, step, 0});
      EXPECT_EQ(as_bf16.mean_loss(), as_fp32.mean_loss());
      for (int l = 0; l < c->n_layer; ++l) {
        const std::vector<float> fc = as_fp32.read_feed_forward_hidden(l);
        std::vector<float> rounded(fc.size());
        for (size_t i = 0; i < fc.size(); ++i) {
          const uint32_t bits = uint32_t{cpu::to_bf16(fc[i])} << 16;
          std::memcpy(&rounded[i], &bits, sizeof(float));
        }
        EXPECT_EQ(as_bf16.read_feed_forward_hidden(l), rounded) << "layer " << l;
      }
      for (GPT* model : {&as_bf16, &as_fp32})
        model->backward(1.0f / (B * T), GradientUpdate::kWrite);
      EXPECT_EQ(as_bf16.read_gradients(), as_fp32.read_gradients()) << "step " << step;
    }
    SamplingOptions options;
    options.max_new_tokens = T + 4;  // past block_size: the cropped recompute too
    EXPECT_EQ(generate(as_bf16, {1, 2, 3}, options, 0, nullptr),
              generate(as_fp32, {1, 2, 3}, options, 0, nullptr));
    // An inference plan (eval, sample) keeps qkv alone as bf16, the key/value cache: smaller by
    // half of each layer's qkv where attention is bf16, and the same tokens generated.
    for (GPT* model : {&as_bf16, &as_fp32}) model->plan(1, T, false);
    EXPECT_NEAR(double(as_fp32.activation_bytes()) - double(as_bf16.activation_bytes()),
                attention_kept ? (c->n_layer * double(T) + 1) * 3 * A * 2 : 0.0,
                (c->n_layer + 1) * 256.0);
    EXPECT_EQ(generate(as_bf16, {3, 2, 1}, options, 1, nullptr),
              generate(as_fp32, {3, 2, 1}, options, 1, nullptr));
  }
}

// The CPU backend, except that it keeps (or recomputes) the LayerNorm and GELU outputs whatever
// they would take.
class KeepingOrRecomputing : public ProfilingBackend {
 public:
  KeepingOrRecomputing(std::unique_ptr<Backend> inner, bool keeps)
      : ProfilingBackend(std::move(inner)), keeps_(keeps) {}
  bool keeps_recomputable_activations(size_t) const override { return keeps_; }

 private:
  bool keeps_;
};

// A training step that keeps every layer's LayerNorm and GELU outputs (small models on the CPU:
// as bf16 with bf16 products) and one that refills one shared buffer of each in the backward pass
// (large models) compute the same values: the same losses and gradients, bit for bit, over two
// passes with dropout, in fp32 and bf16, for ReLU and GELU models, pre_norm and post_norm blocks,
// and heads of 32 (bf16 attention where the CPU has it). The kept plan holds each layer's copies.
TEST(Model, KeepingOrRecomputingTheLayerNormAndGeluOutputsChangesNoBitOfTheStep) {
  Config relu = small_config(), gelu = small_config(), post_norm = load_config("seed004");
  gelu.activation = "gelu";
  gelu.n_embd = 64;
  gelu.n_head = 2;
  gelu.head_size = 32;
  gelu.n_layer = 3;
  for (const char* dtype : {"fp32", "bf16"}) {
    for (const Config* c : {&relu, &gelu, &post_norm}) {
      SCOPED_TRACE(std::string(dtype) + ", " + c->activation + ", " + c->block_order);
      KeepingOrRecomputing keeping(make_backend("cpu", 0, BackendOptions{dtype}), true);
      KeepingOrRecomputing recomputing(make_backend("cpu", 0, BackendOptions{dtype}), false);
      const ModelShape shape = ModelShape::from_config(*c, 65);
      GPT kept(keeping, shape), refilled(recomputing, shape);
      const int B = 3, T = c->block_size;
      for (GPT* model : {&kept, &refilled}) {
        model->initialize(c->seed, c->init_std, false);
        model->plan(B, T, true);
      }
      // Keeping holds n_layer copies where recomputing holds one shared fp32 buffer of each.
      const bool bf16 = std::string(dtype) == "bf16", gelu_model = c->activation != "relu";
      const double rows = double(B) * T, C = shape.n_embd, F = shape.hidden_width();
      const double ln_bytes = bf16 && c->block_order == "pre_norm" ? 2 : 4;
      const double kept_bytes =
          c->n_layer * rows * (2 * C * ln_bytes + (gelu_model ? F * (bf16 ? 2 : 4) : 0));
      const double shared_bytes = rows * (2 * C + (gelu_model ? F : 0)) * 4;
      EXPECT_NEAR(double(kept.activation_bytes()) - double(refilled.activation_bytes()),
                  kept_bytes - shared_bytes, 3 * (c->n_layer + 1) * 256.0);
      const auto tokens = random_tokens(B * T, 65, 5), targets = random_tokens(B * T, 65, 6);
      for (uint32_t step : {1u, 2u}) {
        for (GPT* model : {&kept, &refilled}) {
          model->forward(tokens.data(), targets.data(), B, T, DropoutContext{0.2f, 9, step, 0});
          model->backward(1.0f / (B * T), step == 1 ? GradientUpdate::kWrite : GradientUpdate::kAdd);
        }
        EXPECT_EQ(kept.mean_loss(), refilled.mean_loss()) << "step " << step;
        EXPECT_EQ(kept.read_gradients(), refilled.read_gradients()) << "step " << step;
      }
    }
  }
}

// Which models the CPU keeps them for: the small presets, whose step the refills slowed by a
// tenth, and not the seed's model or GPT-2, where they save hundreds of MB.
TEST(Model, TheCpuKeepsTheLayerNormAndGeluOutputsOfSmallModelsOnly) {
  for (const char* dtype : {"fp32", "bf16"}) {
    auto backend = make_backend("cpu", 0, BackendOptions{dtype});
    for (const auto& [preset, keeps] : std::vector<std::pair<std::string, bool>>{
             {"tiny", true}, {"baby", true}, {"seed004", true}, {"shakespeare_char", false},
             {"nanogpt_char", false}}) {
      SCOPED_TRACE(std::string(dtype) + " " + preset);
      const Config c = load_config(preset);
      GPT model(*backend, ModelShape::from_config(c, 65));
      model.plan(c.batch_size, c.block_size, true);
      EXPECT_EQ(model.recomputes_activations(), !keeps);
    }
  }
}

// backward() writes the logits' gradient over the logits (no (B T, Vp) buffer beside them: at
// GPT-2's vocabulary the widest tensor of a step), so reading them after it is a mistake that
// must say so, not return gradients; and a second backward() would read gradients as logits.
TEST(Model, TheLogitsGradientReplacesTheLogits) {
  auto backend = cpu();
  Config c = small_config();
  const int B = 2, T = c.block_size, V = 5000;  // a vocabulary far wider than the model
  GPT model(*backend, ModelShape::from_config(c, V));
  model.initialize(c.seed, c.init_std, false);
  model.plan(B, T, false);
  const size_t inference_bytes = model.activation_bytes();
  model.plan(B, T, true);
  const size_t logits_bytes = size_t(B) * T * model.shape().padded_vocab_size * sizeof(float);
  EXPECT_LT(model.activation_bytes() - inference_bytes, logits_bytes)
      << "training keeps a second (B T, Vp) tensor beside the logits";
  const auto tokens = random_tokens(B * T, V, 5), targets = random_tokens(B * T, V, 6);
  model.forward(tokens.data(), targets.data(), B, T, DropoutContext{0.2f, 9, 1, 0});
  EXPECT_EQ(model.read_logits().size(), size_t(B) * T * V);
  model.backward(1.0f / (B * T), GradientUpdate::kWrite);
  EXPECT_NE(error_message([&] { model.read_logits(); }).find("read them before"), std::string::npos);
  EXPECT_NE(error_message([&] { model.backward(1.0f, GradientUpdate::kAdd); }).find("one backward"),
            std::string::npos);
  model.forward(tokens.data(), targets.data(), B, T, DropoutContext{0.2f, 9, 1, 0});
  EXPECT_EQ(model.read_logits().size(), size_t(B) * T * V);  // a new forward's logits
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

int32_t argmax(const std::vector<float>& values) {
  return static_cast<int32_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

// Every generated token against an independent full forward (a second model with the same
// weights, so no cache is shared) over the window it was drawn from: the whole context while it
// grows (the key/value cache); past block_size, with window_shift 1, the last block_size tokens
// (the seed's crop), and with window_shift K a window that drops to block_size + 1 - K tokens
// when it overflows and then grows again from the cache.
void expect_greedy_from_full_forwards(int window_shift) {
  auto backend = cpu();
  const Config c = small_config();
  ModelAndReference twins(*backend, c, 65, c.seed, 0.5);
  auto& [model, reference] = twins;
  SamplingOptions options;
  options.temperature = 0;
  options.max_new_tokens = 3 * c.block_size;
  options.window_shift = window_shift;
  const std::vector<int32_t> prompt = {5, 9, 1};
  const std::vector<int32_t> out = generate(model, prompt, options, 0, nullptr);
  ASSERT_EQ(out.size(), prompt.size() + options.max_new_tokens);
  std::set<int32_t> distinct;
  size_t start = 0;  // the window's first token, moved as the rule in generate.h says
  std::set<int> window_sizes;
  for (size_t n = prompt.size(); n < out.size(); ++n) {
    if (n - start > static_cast<size_t>(c.block_size))
      start = n - (c.block_size + 1 - window_shift);
    const int T = static_cast<int>(n - start);
    window_sizes.insert(T);
    reference.forward(out.data() + start, nullptr, 1, T, DropoutContext{});
    EXPECT_EQ(out[n], argmax(reference.logits_row(0, T - 1)))
        << "token " << n << ", window of " << T << " from " << start << ", window_shift "
        << window_shift;
    distinct.insert(out[n]);
  }
  EXPECT_GT(distinct.size(), 4u) << "a near-constant output would make this check weak";
  // Past block_size the windows run from block_size + 1 - K to block_size tokens.
  EXPECT_EQ(*window_sizes.rbegin(), c.block_size);
  EXPECT_TRUE(window_sizes.count(c.block_size + 1 - window_shift));
}

TEST(Generation, GreedyIsTheArgmaxOfAFullForwardOverTheLastBlockSizeTokens) {
  expect_greedy_from_full_forwards(1);
}

TEST(Generation, AWindowShiftedByKTokensIsRecomputedOnceThenCached) {
  expect_greedy_from_full_forwards(5);
  expect_greedy_from_full_forwards(small_config().block_size);  // down to one token each time
}

TEST(Generation, SamplesSharingAPromptReuseItsKeysAndValues) {
  // folio sample --num_samples: each text after the first starts from the prompt's cached rows.
  // The texts must be what a model without that cache draws, within the context and past it, to
  // the bit: the reference model gets a record too, but a fresh one each time (nothing reused).
  auto backend = cpu();
  const Config c = small_config();
  ModelAndReference twins(*backend, c, 65, c.seed, 0.5);
  auto& [model, reference] = twins;
  const std::vector<int32_t> prompt = {5, 9, 1, 7, 3, 2};
  for (const int new_tokens : {8, 3 * c.block_size}) {
    SamplingOptions options;
    options.max_new_tokens = new_tokens;
    options.window_shift = 4;
    KeyValueCacheContents cache;
    for (uint32_t sample = 0; sample < 3; ++sample) {
      KeyValueCacheContents nothing_cached;
      EXPECT_EQ(generate(model, prompt, options, sample, nullptr, &cache),
                generate(reference, prompt, options, sample, nullptr, &nothing_cached))
          << "sample " << sample << " of " << new_tokens << " tokens";
      if (new_tokens == 8) {  // the last window: the prompt and the text but its last token
        EXPECT_EQ(cache.tokens.size(), prompt.size() + new_tokens - 1);
      }
    }
  }
  // The rows really are reused: a record that claims another prompt's first five tokens, while the
  // cache holds this prompt's, makes the other prompt (the same last token) continue as this one.
  SamplingOptions greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = 6;
  const std::vector<int32_t> other = {8, 8, 8, 8, 8, 2};
  const auto continuation = [&](const std::vector<int32_t>& out) {
    return std::vector<int32_t>(out.begin() + 6, out.end());
  };
  const auto from_prompt = continuation(generate(reference, prompt, greedy, 0, nullptr));
  const auto from_other = continuation(generate(reference, other, greedy, 0, nullptr));
  ASSERT_NE(from_prompt, from_other) << "the two prompts must continue differently";
  KeyValueCacheContents lie;
  generate(model, prompt, greedy, 0, nullptr, &lie);
  lie.tokens = other;
  EXPECT_EQ(continuation(generate(model, other, greedy, 0, nullptr, &lie)), from_prompt);
}

TEST(Generation, TextsDrawnTogetherAreTheTextsDrawnAlone) {
  // folio sample --num_samples N draws its texts --sample_batch at a time. Each text must be what
  // it is when drawn alone from the same random stream (its sample index): within the context,
  // past it (each text's window recomputed on its own), and with a text that stops early.
  auto backend = cpu();
  const Config c = small_config();
  ModelAndReference twins(*backend, c, 65, c.seed, 0.5);
  auto& [model, reference] = twins;
  const std::vector<int32_t> prompt = {5, 9, 1, 7};
  const uint32_t first_sample = 2;
  for (const int window_shift : {1, 4}) {
    for (const int new_tokens : {8, 3 * c.block_size}) {
      SamplingOptions options;
      options.max_new_tokens = new_tokens;
      options.window_shift = window_shift;
      SCOPED_TRACE(std::to_string(new_tokens) + " tokens, window_shift " +
                   std::to_string(window_shift));
      const auto together = generate_texts(model, prompt, options, first_sample, 3, nullptr);
      ASSERT_EQ(together.size(), 3u);
      for (uint32_t i = 0; i < 3; ++i)
        EXPECT_EQ(together[i], generate(reference, prompt, options, first_sample + i, nullptr))
            << "text " << i;
      EXPECT_NE(together[0], together[1]);
      // The token text 1 drew fourth, made the stop token: text 1 ends before it (or before an
      // earlier draw of it); the others, as they do alone, where they draw it.
      options.stop_token = together[1][prompt.size() + 3];
      const size_t text_1_end = static_cast<size_t>(
          std::find(together[1].begin() + prompt.size(), together[1].end(), options.stop_token) -
          together[1].begin());
      std::vector<int> passed_on(3, 0);
      const auto stopping = generate_texts(model, prompt, options, first_sample, 3,
                                           [&](int text, int32_t) { ++passed_on[text]; });
      EXPECT_EQ(stopping[1].size(), text_1_end);
      EXPECT_LT(stopping[1].size(), together[1].size());
      for (uint32_t i = 0; i < 3; ++i) {
        EXPECT_EQ(stopping[i], generate(reference, prompt, options, first_sample + i, nullptr))
            << "text " << i << " with a stop token";
        EXPECT_EQ(size_t(passed_on[i]), stopping[i].size() - prompt.size()) << "text " << i;
      }
    }
  }
}

TEST(Generation, MoreTextsThanTheLastCallPlanAnewAndReuseNothing) {
  // A cache record from a call of one text, then a call of three: the model plans room for three
  // texts anew, which drops what was cached, so the record must not be trusted.
  auto backend = cpu();
  const Config c = small_config();
  ModelAndReference twins(*backend, c, 65, c.seed, 0.5);
  auto& [model, reference] = twins;
  const std::vector<int32_t> prompt = {5, 9, 1, 7, 3, 2};
  SamplingOptions options;
  options.max_new_tokens = 8;
  KeyValueCacheContents cache;
  generate_texts(model, prompt, options, 0, 1, nullptr, &cache);
  ASSERT_FALSE(cache.tokens.empty());
  EXPECT_EQ(generate_texts(model, prompt, options, 0, 3, nullptr, &cache),
            generate_texts(reference, prompt, options, 0, 3, nullptr));
}

// A GenerationWindow's start, T and first_row, as one expectation.
void expect_window(const GenerationWindow& w, size_t start, int T, int first_row) {
  EXPECT_EQ(w.start, start);
  EXPECT_EQ(w.T, T);
  EXPECT_EQ(w.first_row, first_row);
}

TEST(Generation, TheWindowRuleOfEachStep) {
  // block_size 8: a prompt of 3 grows in the cache; the 9th token overflows.
  expect_window(next_generation_window(3, 0, 0, 8, 3), 0, 3, 0);
  expect_window(next_generation_window(4, 0, 3, 8, 3), 0, 4, 3);
  // 9 > 8: keep 8 + 1 - 3 = 6, all recomputed; then from the cache again
  expect_window(next_generation_window(9, 0, 8, 8, 3), 3, 6, 0);
  expect_window(next_generation_window(10, 3, 6, 8, 3), 3, 7, 6);
  // the seed's: the last 8, every step
  expect_window(next_generation_window(9, 0, 8, 8, 1), 1, 8, 0);
  expect_window(next_generation_window(10, 1, 8, 8, 1), 2, 8, 0);
  // a prompt longer than block_size
  expect_window(next_generation_window(20, 0, 0, 8, 2), 13, 7, 0);
  EXPECT_NE(error_message([] { next_generation_window(9, 0, 8, 8, 9); }).find("block_size"),
            std::string::npos);
  EXPECT_NE(error_message([] { next_generation_window(9, 0, 8, 8, 0); }).find("window_shift"),
            std::string::npos);
}

// What sampling must draw from: softmax(logits / temperature), cut to the top_k most likely,
// then to the smallest most-likely prefix whose probability reaches top_p, renormalised.
std::vector<double> expected_probabilities(const std::vector<float>& logits,
                                           const SamplingOptions& options) {
  const size_t V = logits.size();
  std::vector<double> p(V);
  double total = 0;
  for (size_t i = 0; i < V; ++i) total += p[i] = std::exp(logits[i] / options.temperature);
  std::vector<size_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  const size_t k = options.top_k > 0 ? std::min<size_t>(options.top_k, V) : V;
  double kept = 0;
  for (size_t rank = 0; rank < k; ++rank) kept += p[order[rank]];
  double cumulative = 0;
  std::vector<double> out(V, 0.0);
  for (size_t rank = 0; rank < k && cumulative < options.top_p; ++rank) {
    out[order[rank]] = p[order[rank]] / kept;
    cumulative += out[order[rank]];
  }
  for (double& value : out) value /= cumulative;
  return out;
}

TEST(Sampling, DrawsFollowTemperatureTopKAndTopP) {
  // 100,000 draws per setting; each token's count must be within 5.5 standard deviations of its
  // binomial expectation (a false alarm about once in 10^7 per token; the stream is fixed, so the
  // result is too), and a token outside the cut must never be drawn. Multiplying the logits by
  // the temperature, or cutting after the wrong token, moves counts by hundreds of deviations.
  const std::vector<float> logits = {1.0f, 2.5f, -0.5f, 0.3f, 2.0f, -2.0f, 1.2f};
  const int draws = 100000;
  struct Setting {
    double temperature;
    int top_k;
    double top_p;
  };
  for (const Setting s : {Setting{1.0, 0, 1.0}, Setting{0.6, 0, 1.0}, Setting{1.7, 0, 1.0},
                          Setting{0.8, 3, 1.0}, Setting{1.3, 0, 0.8}, Setting{0.9, 4, 0.6}}) {
    SamplingOptions options;
    options.temperature = s.temperature;
    options.top_k = s.top_k;
    options.top_p = s.top_p;
    const std::vector<double> p = expected_probabilities(logits, options);
    std::vector<int> counts(logits.size(), 0);
    const RandomStream stream{77, 1, 2, 3};
    for (int i = 0; i < draws; ++i)
      ++counts.at(sample_from_logits(logits, options, stream.word64(i)));
    for (size_t id = 0; id < logits.size(); ++id) {
      const double mean = draws * p[id], deviation = std::sqrt(draws * p[id] * (1 - p[id]));
      EXPECT_LE(std::abs(counts[id] - mean), 5.5 * deviation)
          << "token " << id << ": drawn " << counts[id] << " times, expected " << mean
          << " (temperature " << s.temperature << ", top_k " << s.top_k << ", top_p " << s.top_p
          << ")";
    }
  }
}

TEST(Sampling, TopKOfOneAndTemperatureZeroTakeTheMostLikely) {
  const std::vector<float> logits = {0.0f, 3.0f, 2.0f, -1.0f, 2.9f};
  SamplingOptions top1, greedy;
  top1.top_k = 1;
  greedy.temperature = 0;
  for (uint64_t w : {0ULL, ~0ULL, 12345678901234ULL}) {
    EXPECT_EQ(sample_from_logits(logits, top1, w), 1);
    EXPECT_EQ(sample_from_logits(logits, greedy, w), 1);
  }
}

TEST(Sampling, ScoresThatAreNotFiniteAreAnErrorNotADraw) {
  SamplingOptions greedy, drawn;
  greedy.temperature = 0;
  for (const float bad : {std::nanf(""), std::numeric_limits<float>::infinity()})
    for (const SamplingOptions& options : {greedy, drawn}) {
      const std::vector<float> logits = {0.5f, bad, 1.0f};
      EXPECT_NE(testing::error_message([&] { sample_from_logits(logits, options, 42); })
                    .find("next-token scores are not finite"),
                std::string::npos);
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
  EXPECT_EQ(loaded.tokenizer.characters()->symbols(), vocabulary.symbols());
  EXPECT_EQ(loaded.config.head_size, 10);
  EXPECT_EQ(loaded.parameters->read_all(), model.read_parameters());
  // The per-head names of the seed are in the file.
  const auto file = SafetensorsFile::read(dir.file("ckpt.safetensors"));
  EXPECT_NE(file.find("blocks.1.sa.heads.2.value.weight"), nullptr);
  EXPECT_EQ(file.find("blocks.1.sa.heads.2.value.weight")->shape, (std::vector<int64_t>{10, 32}));
  EXPECT_EQ(file.find("blocks.0.sa.proj.weight")->shape, (std::vector<int64_t>{32, 30}));
}

TEST(Checkpoint, Seed004NamesAreItsModules) {
  // torch_names = seed004: the notebook's module names, its k holding folio's queries (rows
  // [0, A) of the fused qkv) and its q folio's keys (rows [A, 2A)), biases included.
  TempDir dir;
  auto backend = cpu();
  const Config c = load_config("seed004");
  const Vocabulary vocabulary = Vocabulary::from_text(U"abcdefghij");
  GPT model(*backend, ModelShape::from_config(c, vocabulary.size()));
  model.initialize(11, 0.02, false, InitScheme::kTorchDefault);
  save_checkpoint(dir.file("ckpt.safetensors"), model, c, vocabulary, 1, 1, 1);
  const auto file = SafetensorsFile::read(dir.file("ckpt.safetensors"));
  const std::vector<float> p = model.read_parameters();
  const ParameterTensor& qkv = model.layout().at("blocks.1.sa.qkv.weight");
  const ParameterTensor& qkv_bias = model.layout().at("blocks.1.sa.qkv.bias");
  const int A = 30, C = 32, hs = 10;
  auto rows = [&](const ParameterTensor& t, int first, int width) {
    return std::vector<float>(p.begin() + t.offset + size_t(first) * width,
                              p.begin() + t.offset + size_t(first + hs) * width);
  };
  EXPECT_EQ(file.to_float32(*file.find("blocks.1.multihead.heads.2.k.weight")),
            rows(qkv, 2 * hs, C));
  EXPECT_EQ(file.to_float32(*file.find("blocks.1.multihead.heads.2.q.weight")),
            rows(qkv, A + 2 * hs, C));
  EXPECT_EQ(file.to_float32(*file.find("blocks.1.multihead.heads.2.v.bias")),
            rows(qkv_bias, 2 * A + 2 * hs, 1));
  for (const char* name : {"token_emb.weight", "position_emb.weight", "blocks.0.layernorm1.bias",
                           "blocks.1.layernorm2.weight", "blocks.0.multihead.proj.bias",
                           "blocks.1.feedforward.net.2.weight", "blocks.2.weight", "blocks.2.bias",
                           "out.weight", "out.bias"})
    EXPECT_NE(file.find(name), nullptr) << name;
  EXPECT_EQ(file.find("blocks.0.sa.heads.0.key.weight"), nullptr);
  EXPECT_EQ(file.find("ln_f.weight"), nullptr);
  const LoadedCheckpoint loaded = load_checkpoint(dir.file("ckpt.safetensors"), Config{}, nullptr);
  EXPECT_EQ(loaded.config.block_order, "post_norm");
  EXPECT_EQ(loaded.parameters->read_all(), p);
  // `folio info` names the preset and the options.
  EXPECT_EQ(matching_preset(loaded.config), "seed004");
  const std::string summary = summary_text({loaded, ""});
  EXPECT_NE(summary.find("k/q/v biases, post_norm blocks, seed 004's module names"),
            std::string::npos)
      << summary;
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
  EXPECT_EQ(loaded.parameters->read_all(), model.read_parameters());
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
