// The GPT of the seeds: token + position embedding, n_layer pre-LayerNorm blocks
// (x + sa(ln1(x)), then x + ffwd(ln2(x))), or seed 004's post-LayerNorm ones (block_order), a
// final LayerNorm and the lm_head, trained on the mean cross-entropy over all positions. forward()
// and backward() in gpt.cpp read top to bottom like the seed's Python; every computation is a
// Backend op.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/device_buffer.h"
#include "config/config.h"
#include "model/activation_plan.h"
#include "model/model_shape.h"
#include "model/parameter_layout.h"

namespace folio {

// What dropout draws in one forward pass: the run's seed, the step, and the global index of the
// batch's first window. p = 0 (eval, generation) turns the blocks' dropouts off, embedding_p = 0
// the embeddings' (the seeds have none; nanoGPT drops out tok_emb + pos_emb at its one rate).
struct DropoutContext {
  float p = 0.0f;
  uint64_t seed = 0;
  uint32_t step = 0;
  uint32_t first_sample = 0;
  float embedding_p = 0.0f;

  // A training step's: the config's rates (dropout, embedding_dropout) and seed.
  static DropoutContext of(const Config& config, uint32_t step, uint32_t first_sample) {
    return DropoutContext{static_cast<float>(config.dropout), config.seed, step, first_sample,
                          static_cast<float>(config.embedding_dropout)};
  }
  DropoutSpec at(int layer, DropoutSite site) const {
    return p > 0.0f ? dropout_spec(p, seed, step, layer, site, first_sample) : no_dropout();
  }
  DropoutSpec at_embedding() const {
    return embedding_p > 0.0f
               ? dropout_spec(embedding_p, seed, step, 0, DropoutSite::kEmbedding, first_sample)
               : no_dropout();
  }
};

// How GPT::initialize draws the weights (config key init).
enum class InitScheme {
  kNormal,        // Linear and Embedding weights N(0, init_std), biases 0 (seed 000, nanoGPT)
  kTorchDefault,  // PyTorch's defaults: Linear U(+-1/sqrt(fan_in)), Embedding N(0, 1) (seed 004)
};
inline InitScheme init_scheme_of(const Config& config) {
  return config.init == "torch_default" ? InitScheme::kTorchDefault : InitScheme::kNormal;
}

class GPT {
 public:
  GPT(Backend& backend, const ModelShape& shape);
  // A twin of `model` on `backend` (one share of a batch split across threads, backend.h): it
  // computes with `model`'s parameters, which it reads in place and never writes, and has
  // activations and gradients of its own. `backend` must reach `model`'s memory.
  GPT(Backend& backend, const GPT& model);

  const ModelShape& shape() const { return shape_; }
  const ParameterLayout& layout() const { return layout_; }
  Backend& backend() const { return backend_; }
  size_t parameter_count() const { return layout_.total(); }

  // ---- parameters (device memory, flat) -------------------------------------------------------
  float* parameters() const { return parameter_values_; }
  // Allocated (and zeroed) at their first use: a model that only samples or evaluates has none,
  // which halves its memory (gpt2-xl: 6.2 GB of gradients).
  float* gradients() const;
  // kNormal: every Linear and Embedding weight N(0, init_std), biases 0, LayerNorm 1 and 0; with
  // scaled_residual_init, sa.proj and ffwd.net.2 weights N(0, init_std / sqrt(2 n_layer)).
  // kTorchDefault: what PyTorch's modules do when constructed (see InitKind). Deterministic in
  // `seed`; the distributions are PyTorch's, its random stream is not.
  void initialize(uint64_t seed, double init_std, bool scaled_residual_init,
                  InitScheme scheme = InitScheme::kNormal);
  std::vector<float> read_parameters() const;
  void write_parameters(const std::vector<float>& host);
  // `count` values at flat position `offset` (a checkpoint is written in pieces: ParameterSource).
  void write_parameters(size_t offset, const float* host, size_t count);
  std::vector<float> read_gradients() const;
  void zero_gradients();

  // ---- passes -----------------------------------------------------------------------------------
  // Forward over tokens (B, T) (host memory); with targets, also the per-position losses.
  // first_row > 0 (only with B = 1) computes rows first_row..T-1 alone, reusing the earlier rows'
  // keys and values from the previous call: the key/value cache of generation.
  // last_logits_only (generation, without targets) computes the logits of row T-1 of each sample
  // alone: what the next token is drawn from; a prompt's other rows need no 50k-wide products,
  // and in the last block no more than their keys and values. Its other rows' activations are
  // then left unwritten (logits_row() reads row T-1 only; read_logits() refuses).
  void forward(const int32_t* tokens, const int32_t* targets, int B, int T,
               const DropoutContext& dropout, int first_row = 0, bool last_logits_only = false);
  // ---- several texts at once (generation: folio sample --num_samples) ------------------------
  // Text b's key/value cache is its own place in each layer's qkv, b * block_size rows in; a
  // forward() of one sample computes into text 0's. plan_texts(n) makes room for n texts (a new
  // plan drops what was cached: call it before the texts' first forward).
  void plan_texts(int texts);
  // Copies the first `rows` cached rows of text `from` (every layer's keys and values) to text `to`.
  void copy_cached_rows(int from, int to, int rows);
  // One new token for each of `texts` texts (tokens[b], host memory), all at `position`, the rows
  // before it cached: each text's row joins its cache, and its logits are logits_row(b, 0). The
  // weights are read once for all the texts' rows: on a CPU, where reading GPT-2's weights is most
  // of a token's time, n texts cost little more than one.
  void forward_next_tokens(const int32_t* tokens, int texts, int position);
  // The bytes of one text's key/value cache (every layer's qkv, block_size rows).
  size_t cache_bytes_per_text() const;

  // Mean loss of the last forward with targets (waits for the device).
  float mean_loss() const;
  // The loss sum of the last forward with targets, copied on the device into `slot` (device
  // memory of this model's backend; no waiting), and the mean losses of `count` such slots, each
  // kept after a forward of the last forward's B and T, read back at once: what mean_loss() would
  // have said after each. Evaluation keeps its batches' losses so, and the GPU runs its passes
  // back to back instead of waiting for the host after each.
  void keep_loss_sum(float* slot) const;
  std::vector<float> mean_losses(const float* slots, size_t count) const;
  // The gradient of (dloss * sum of the per-position losses) of the last forward, added to
  // gradients() (kAdd) or replacing what they held (kWrite: a step's first micro-batch, with no
  // zero_gradients() before it); dloss = 1 / (B T) gives the gradient of the mean loss.
  // `done(offset, count)`, where given, hears of each stretch of gradients() (in floats) as soon
  // as this pass has written it for the last time: a block's tensors when the pass leaves the
  // block (the last to come, its ln1, is computed with the block below's feed-forward), from the
  // last block to the first, then the rest (embeddings, ln_f, lm_head); each tensor once. Data
  // parallelism starts summing each over the ranks then (TrainingStep), as DDP's buckets do.
  using GradientsDone = std::function<void(size_t offset, size_t count)>;
  void backward(float dloss, GradientUpdate update, const GradientsDone& done = nullptr);
  // Those stretches in the order backward() reports them, for a step whose gradients another
  // pass computed (TrainingStep's batch split) and that begins the same sums in the same order.
  std::vector<std::pair<size_t, size_t>> gradients_in_backward_order() const;
  // Logits of row t of sample b of the last forward (host copy), the V of the vocabulary. Only
  // before backward(), whose first op replaces the logits with their gradient (in place).
  std::vector<float> logits_row(int b, int t) const;
  std::vector<float> read_logits() const;  // (B, T, V) of the last forward, padding left out
  // The feed-forward hidden values (B, T, 4C) of block `layer` in the last forward (host copy):
  // before the nonlinearity, or for ReLU after it (kept in place, see activation_plan.h), whose
  // signs are ReLU's mask either way. The PyTorch comparison needs the side of ReLU's kink folio
  // took where fc is within rounding of zero (bf16 values where the plan keeps fc so). Only after a
  // forward of a plan with gradients.
  std::vector<float> read_feed_forward_hidden(int layer) const;

  // Allocates the activations for batches of up to (B, T) now, rather than at the first forward.
  void plan(int B, int T, bool with_gradients);
  // Counts the plans made: a recorded training step holds the addresses of one (TrainingStep).
  uint64_t plans_made() const { return plans_made_; }
  size_t activation_bytes() const { return activations_.bytes(); }
  // Whether the plan's backward pass recomputes the LayerNorm and GELU outputs (activation_plan.h).
  bool recomputes_activations() const { return activations_.recomputes; }

 private:
  // A loss sum of the last forward's B x T positions as their mean (mean_loss, mean_losses).
  float mean_of(float loss_sum) const;
  std::vector<std::pair<size_t, size_t>> gradients_added_into() const;
  void check_logits_readable() const;
  // Block l from its attention output on: x = x + dropout(proj(att)), ln2, x = x + dropout(
  // ffwd(ln2(x))) and the LayerNorm after the block, over `rows` rows of B samples from row `from`
  // of the shared buffers; residual_in is x (post_norm: ln1(x)) at those rows.
  void block_after_attention(int l, size_t from, const float* att, const float* residual_in,
                             float* branch, int B, int rows, const DropoutContext& dropout);

  Backend& backend_;
  ModelShape shape_;
  ParameterLayout layout_;
  DeviceBuffer parameters_;           // empty in a twin
  float* parameter_values_ = nullptr;  // parameters_, or the twinned model's
  mutable DeviceBuffer gradients_;  // see gradients()
  ModelTensors weights_;
  mutable ModelTensors grads_;
  // The stretches of gradients() that backward() adds into even when it writes the gradients
  // (LayerNorms, embeddings): (offset, count) in floats, zeroed by backward(.., kWrite).
  mutable std::vector<std::pair<size_t, size_t>> added_gradients_;
  // backward()'s `done` stretches: block l's tensors (adjacent ones merged), and the rest.
  std::vector<std::vector<std::pair<size_t, size_t>>> block_gradients_;
  std::vector<std::pair<size_t, size_t>> other_gradients_;
  ActivationPlan activations_;
  // The shape and dropout of the last forward, which backward() differentiates.
  int last_B_ = 0, last_T_ = 0;
  uint64_t plans_made_ = 0;
  bool last_had_targets_ = false;
  bool last_logits_only_ = false;  // the last forward wrote one row of logits, at the buffer's start
  bool logits_hold_their_gradient_ = false;  // backward() ran since the last forward()
  DropoutContext last_dropout_;
};

}  // namespace folio
