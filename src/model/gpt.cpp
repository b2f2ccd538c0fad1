#include "model/gpt.h"

#include <cmath>
#include <cstring>
#include <set>
#include <string>

#include "core/error.h"
#include "core/philox.h"

namespace folio {

namespace {

// A LayerNorm's output and saved row statistics, and its weight and bias (or their gradients),
// and who reads its output (ActivationPlan::block_ln_read_by).
struct NormTensors {
  float *out, *mean, *rstd;
  float *weight, *bias;
  ReadBy out_read_by = ReadBy::kAnyOp;
  bool out_in_bf16 = false;  // a block's LayerNorm output kept as bf16 (ActivationPlan::ln_in_bf16)

  // The same from row `first` on (see BlockRows); the weights are not per row.
  NormTensors from_row(size_t first, size_t C) const {
    return {bf16_rows(out, first, C, out_in_bf16), mean + first, rstd + first, weight, bias,
            out_read_by, out_in_bf16};
  }
};

// The LayerNorm that reads the residual stream after block l: ln1 of block l + 1, or ln_f after
// the last block (l = -1: the first block's ln1, which reads the embeddings).
NormTensors norm_after(ActivationPlan& plan, const ModelTensors& tensors, int l) {
  if (l + 1 < static_cast<int>(plan.layers.size())) {
    LayerActivations& next = plan.layers[l + 1];
    const LayerTensors& t = tensors.layers[l + 1];
    return {next.ln1, next.ln1_mean, next.ln1_rstd, t.ln1_weight, t.ln1_bias,
            plan.block_ln_read_by(), plan.ln_in_bf16};
  }
  return {plan.lnf, plan.lnf_mean, plan.lnf_rstd, tensors.lnf_weight, tensors.lnf_bias};
}

// The activations a forward pass writes, from row `first` on: generation's key/value cache
// computes rows first..T-1 of its one sample alone, training and evaluation every row (first 0).
// The row-wise ops (matmul, LayerNorm, activation, residual adds, loss) take these; attention
// takes the whole buffers and `first` itself, since its new rows read the cached ones.
struct BlockRows {
  float *qkv, *att, *residual_mid;
  float *ln2, *ln2_mean, *ln2_rstd;
  float *fc, *fc_act, *residual_out;
};

BlockRows block_rows(const ActivationPlan& plan, int layer, size_t first, const ModelShape& shape) {
  const LayerActivations& block = plan.layers[layer];
  const size_t C = shape.n_embd, A = shape.attention_width(), F = shape.hidden_width();
  float* fc = bf16_rows(block.fc, first, F, plan.fc_in_bf16);
  return {bf16_rows(block.qkv, first, 3 * A, plan.qkv_in_bf16),
          bf16_rows(block.att, first, A, plan.att_in_bf16),
          block.residual_mid + first * C,
          bf16_rows(block.ln2, first, C, plan.ln_in_bf16),
          block.ln2_mean + first,
          block.ln2_rstd + first,
          fc,
          plan.relu_in_place ? fc : bf16_rows(block.fc_act, first, F, plan.fc_act_in_bf16),
          block.residual_out + first * C};
}

// Appends a tensor's stretch of the parameter (or gradient) buffer, (offset, count) in floats, to
// `stretches`, merged with the last one where they are adjacent.
void add_stretch(std::vector<std::pair<size_t, size_t>>& stretches, const ParameterTensor& tensor) {
  if (!stretches.empty() && stretches.back().first + stretches.back().second == tensor.offset)
    stretches.back().second += tensor.size;
  else
    stretches.emplace_back(tensor.offset, tensor.size);
}

// The block a tensor belongs to ("blocks.3.sa.qkv.weight": 3), or -1 (embeddings, ln_f, lm_head).
int block_of(const std::string& tensor_name) {
  const std::string prefix = "blocks.";
  if (tensor_name.compare(0, prefix.size(), prefix) != 0) return -1;
  return std::stoi(tensor_name.substr(prefix.size()));
}

struct ModelRows {
  int32_t *tokens, *targets;
  float *embedded, *branch, *logits, *losses;
};

ModelRows model_rows(const ActivationPlan& plan, size_t first, const ModelShape& shape) {
  const size_t C = shape.n_embd, Vp = shape.padded_vocab_size;
  return {plan.tokens + first,     plan.targets + first,     plan.embedded + first * C,
          plan.branch + first * C, plan.logits + first * Vp, plan.losses + first};
}

}  // namespace

GPT::GPT(Backend& backend, const ModelShape& shape)
    : backend_(backend),
      shape_(shape),
      layout_(shape),
      parameters_(backend, layout_.total() * sizeof(float)),
      parameter_values_(parameters_.as<float>()) {
  weights_ = bind_tensors(layout_, shape_, parameters());
  backend_.fill_zero(parameters(), layout_.total() * sizeof(float));
  block_gradients_.resize(shape_.n_layer);
  for (const ParameterTensor& tensor : layout_.tensors()) {
    const int block = block_of(tensor.name);
    add_stretch(block >= 0 ? block_gradients_[block] : other_gradients_, tensor);
  }
  backend_.set_parameter_buffer(parameters(), layout_.total());  // a GPU keeps a bf16 mirror
}

GPT::GPT(Backend& backend, const GPT& model)
    : backend_(backend),
      shape_(model.shape_),
      layout_(model.layout_),
      parameter_values_(model.parameters()),
      weights_(model.weights_),
      block_gradients_(model.block_gradients_),
      other_gradients_(model.other_gradients_) {
  backend_.set_parameter_buffer(parameters(), layout_.total());
}

void GPT::initialize(uint64_t seed, double init_std, bool scaled_residual_init, InitScheme scheme) {
  std::vector<float> host(layout_.total());
  const double residual_std =
      scaled_residual_init ? init_std / std::sqrt(2.0 * shape_.n_layer) : init_std;
  const bool torch_default = scheme == InitScheme::kTorchDefault;
  for (size_t index = 0; index < layout_.tensors().size(); ++index) {
    const ParameterTensor& tensor = layout_.tensors()[index];
    float* values = host.data() + tensor.offset;
    // Each tensor has its own stream of Philox words (item = its index). Rows of vocabulary
    // padding stay zero (the host buffer's), so the real rows get the same values with and
    // without padding.
    const RandomStream stream =
        make_stream(seed, RandomPurpose::kInit, 0, static_cast<uint32_t>(index));
    const size_t drawn = tensor.saved_size();
    auto constant = [&](float value) { std::fill(values, values + drawn, value); };
    // nn.Linear's reset_parameters: kaiming_uniform_(a=sqrt(5)) for the weight, whose bound
    // gain * sqrt(3 / fan_in) with gain sqrt(2 / (1 + 5)) is 1/sqrt(fan_in), and the same bound
    // for the bias. One Philox word per value.
    auto uniform = [&]() {
      const double bound = 1.0 / std::sqrt(static_cast<double>(tensor.fan_in));
      for (size_t i = 0; i < drawn; ++i) {
        const double u = stream.word(i) / 4294967296.0;  // [0, 1)
        values[i] = static_cast<float>((2.0 * u - 1.0) * bound);
      }
    };
    // Box-Muller on pairs of Philox words.
    auto normal = [&](double stddev) {
      for (size_t i = 0; i < drawn; i += 2) {
        const PhiloxBlock block = stream.block(static_cast<uint32_t>(i / 4));
        const int lane = static_cast<int>(i % 4);
        const double u1 = (block.word[lane] + 1.0) / 4294967296.0;  // (0, 1]
        const double u2 = block.word[lane + 1] / 4294967296.0;      // [0, 1)
        const double radius = std::sqrt(-2.0 * std::log(u1)) * stddev;
        values[i] = static_cast<float>(radius * std::cos(2.0 * M_PI * u2));
        if (i + 1 < drawn)
          values[i + 1] = static_cast<float>(radius * std::sin(2.0 * M_PI * u2));
      }
    };
    switch (tensor.init) {
      case InitKind::kNormWeight:
        constant(1.0f);
        break;
      case InitKind::kNormBias:
        constant(0.0f);
        break;
      case InitKind::kEmbedding:
        normal(torch_default ? 1.0 : init_std);  // nn.Embedding: N(0, 1)
        break;
      case InitKind::kLinearWeight:
      case InitKind::kResidualWeight:
        if (torch_default)
          uniform();
        else
          normal(tensor.init == InitKind::kResidualWeight ? residual_std : init_std);
        break;
      case InitKind::kLinearBias:
        if (torch_default)
          uniform();
        else
          constant(0.0f);
        break;
    }
  }
  write_parameters(host);
}

std::vector<float> GPT::read_parameters() const {
  std::vector<float> host(layout_.total());
  backend_.copy_to_host(host.data(), parameters(), host.size() * sizeof(float));
  return host;
}

void GPT::write_parameters(const std::vector<float>& host) {
  if (host.size() != layout_.total()) throw Error("internal: parameter count mismatch");
  backend_.copy_to_device(parameters(), host.data(), host.size() * sizeof(float));
}

void GPT::write_parameters(size_t offset, const float* host, size_t count) {
  if (offset > layout_.total() || count > layout_.total() - offset)
    throw Error("internal: parameter range outside the model");
  backend_.copy_to_device(parameters() + offset, host, count * sizeof(float));
}

std::vector<float> GPT::read_gradients() const {
  std::vector<float> host(layout_.total());
  backend_.copy_to_host(host.data(), gradients(), host.size() * sizeof(float));
  return host;
}

float* GPT::gradients() const {
  if (gradients_.get() == nullptr) {
    gradients_ = DeviceBuffer(backend_, layout_.total() * sizeof(float));
    grads_ = bind_tensors(layout_, shape_, gradients_.as<float>());
    backend_.fill_zero(gradients_.get(), layout_.total() * sizeof(float));
    added_gradients_ = gradients_added_into();
  }
  return gradients_.as<float>();
}

// Every linear layer's weight and bias gradient is written by its product in backward(.., kWrite)
// (the tied lm_head's too, before the token embedding's scatter adds to it); the rest (LayerNorm
// weights and biases, the embeddings) are added into, so must start from zero. Adjacent tensors
// are merged: a handful of fills where zeroing every gradient was 2.6% of a GPT-2 step.
std::vector<std::pair<size_t, size_t>> GPT::gradients_added_into() const {
  std::set<const float*> written{grads_.lm_head_weight, grads_.lm_head_bias};
  for (const LayerTensors& g : grads_.layers)
    written.insert({g.qkv_weight, g.qkv_bias, g.proj_weight, g.proj_bias, g.fc_weight, g.fc_bias,
                    g.fc2_weight, g.fc2_bias});
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const ParameterTensor& tensor : layout_.tensors())
    if (!written.count(gradients_.as<float>() + tensor.offset)) add_stretch(ranges, tensor);
  return ranges;
}

void GPT::zero_gradients() {
  backend_.fill_zero(gradients(), layout_.total() * sizeof(float));
}

void GPT::plan(int B, int T, bool with_gradients) {
  if (T > shape_.block_size)
    throw Error("internal: sequence of " + std::to_string(T) + " tokens exceeds block_size");
  activations_ = ActivationPlan();  // free the old plan before taking memory for the new one
  activations_ = plan_activations(backend_, shape_, B, T, with_gradients);
  ++plans_made_;
}

void GPT::block_after_attention(int l, size_t from, const float* att, const float* residual_in,
                                float* branch, int B, int rows, const DropoutContext& dropout) {
  const LayerTensors& w = weights_.layers[l];
  const int C = shape_.n_embd, A = shape_.attention_width(), F = shape_.hidden_width();
  const size_t per_sample = static_cast<size_t>(rows) * C / B;
  const BlockRows row = block_rows(activations_, l, from, shape_);
  backend_.matmul_forward(branch, att, w.proj_weight, w.proj_bias, rows, A, C);
  backend_.dropout_add_layernorm_forward(row.residual_mid, row.ln2, row.ln2_mean, row.ln2_rstd,
                                         residual_in, branch, w.ln2_weight, w.ln2_bias, B,
                                         per_sample, C,
                                         dropout.at(l, DropoutSite::kAttentionOutput),
                                         activations_.block_ln_read_by());
  // x = x + ffwd(ln2(x)); ffwd = dropout(net.2(act(net.0(.)))); then the next LayerNorm
  backend_.matmul_activation_forward(row.fc, row.fc_act, row.ln2, w.fc_weight, w.fc_bias, rows,
                                     C, F, shape_.activation, activations_.fc_act_read_by());
  backend_.matmul_forward(branch, row.fc_act, w.fc2_weight, w.fc2_bias, rows, F, C);
  const NormTensors next = norm_after(activations_, weights_, l).from_row(from, C);
  const bool post_norm = shape_.block_order == BlockOrder::kPostNorm;
  backend_.dropout_add_layernorm_forward(row.residual_out, next.out, next.mean, next.rstd,
                                         post_norm ? row.ln2 : row.residual_mid, branch,
                                         next.weight, next.bias, B, per_sample, C,
                                         dropout.at(l, DropoutSite::kFeedForwardOutput),
                                         next.out_read_by);
}

void GPT::forward(const int32_t* tokens, const int32_t* targets, int B, int T,
                  const DropoutContext& dropout, int first_row, bool last_logits_only) {
  if (first_row > 0 && (B != 1 || T > activations_.T))
    throw Error("internal: the key/value cache needs B = 1 and planned activations");
  if (last_logits_only && (B != 1 || targets != nullptr))
    throw Error("internal: the last row's logits alone are for generation (B = 1, no targets)");
  // Plan for whole windows at once, so that a growing generation context never re-plans (which
  // would drop the cached rows).
  if (B > activations_.B || T > activations_.T)
    plan(std::max(B, activations_.B), shape_.block_size, activations_.with_gradients);
  const int C = shape_.n_embd, A = shape_.attention_width();
  const int H = shape_.n_head, hs = shape_.head_size;
  const int V = shape_.vocab_size, Vp = shape_.padded_vocab_size;
  const size_t first = static_cast<size_t>(first_row);
  const int rows = B * T - first_row;  // rows computed by the row-wise ops
  const size_t per_sample = static_cast<size_t>(T - first_row) * C;
  const ModelRows model = model_rows(activations_, first, shape_);

  backend_.copy_to_device(model.tokens, tokens + first, rows * sizeof(int32_t));
  if (targets) backend_.copy_to_device(model.targets, targets + first, rows * sizeof(int32_t));

  // x = token_embedding_table(idx) + position_embedding_table(arange(T))
  backend_.embedding_forward(model.embedded, model.tokens, weights_.token_embedding,
                             weights_.position_embedding, B, T - first_row, C, first_row);
  // x = drop(x), nanoGPT's embedding dropout (embedding_dropout; none in the seeds), in place
  const DropoutSpec embedding_dropout = dropout.at_embedding();
  if (embedding_dropout.active())
    backend_.dropout_add_forward(model.embedded, /*residual=*/nullptr, model.embedded, B,
                                 per_sample, embedding_dropout);
  const float* x = model.embedded;
  // Each residual add runs fused with the LayerNorm that reads its result: ln2 inside a block, and
  // the next block's ln1 (ln_f after the last block) at its end; only the first ln1 runs alone.
  const NormTensors ln1 = norm_after(activations_, weights_, -1).from_row(first, C);
  backend_.layernorm_forward(ln1.out, ln1.mean, ln1.rstd, x, ln1.weight, ln1.bias, rows, C,
                             ln1.out_read_by);
  // pre_norm adds each branch to the residual stream x; post_norm (seed 004) to the LayerNorm's
  // output, which replaces the stream: x = ln1(x); x = x + sa(x); x = ln2(x); x = x + ffwd(x).
  const bool post_norm = shape_.block_order == BlockOrder::kPostNorm;
  for (int l = 0; l < shape_.n_layer; ++l) {
    const LayerTensors& w = weights_.layers[l];
    LayerActivations& block = activations_.layers[l];
    const BlockRows new_rows = block_rows(activations_, l, first, shape_);
    const float* ln1_out = norm_after(activations_, weights_, l - 1).from_row(first, C).out;
    // x = x + sa(ln1(x)); sa = dropout(proj(concat of heads)), each head dropout on its weights
    backend_.matmul_forward(new_rows.qkv, ln1_out, w.qkv_weight, w.qkv_bias, rows, C, 3 * A);
    // From the queries on, the last block of a generation step computes row T-1 alone: the new
    // rows' keys and values are in qkv now (the cache, and what row T-1 attends to), and nothing
    // else this block writes for the other rows is ever read, since the next token is drawn from
    // row T-1's logits. Of a block's 12 C^2 multiply-adds a row (qkv 3, proj 1, the MLP 8) the
    // other rows keep 3: a window cropped past block_size, recomputed whole for each token, so
    // skips 9/72 of shakespeare_char's products (six blocks), and its last block's attention.
    const bool last_row_alone = last_logits_only && l == shape_.n_layer - 1;  // B is 1 then
    const size_t from = last_row_alone ? static_cast<size_t>(T - 1) : first;
    const int from_rows = B * T - static_cast<int>(from);
    const float* residual_in = post_norm
        ? norm_after(activations_, weights_, l - 1).from_row(from, C).out
        : x + (from - first) * C;
    backend_.attention_forward(block.att, block.attention_saved, block.qkv, B, T, H, hs,
                               static_cast<int>(from),
                               dropout.at(l, DropoutSite::kAttentionWeights));
    block_after_attention(l, from, block_rows(activations_, l, from, shape_).att, residual_in,
                          model.branch + (from - first) * C, B, from_rows, dropout);
    x = new_rows.residual_out;
  }
  // logits = lm_head(ln_f(x)), ln_f having run with the last residual add; (rows, Vp), of which
  // the first V columns are the vocabulary's (the rest, padding, are never read)
  const float* ln_f_out =
      norm_after(activations_, weights_, shape_.n_layer - 1).from_row(first, C).out;
  const int skipped = last_logits_only ? rows - 1 : 0;  // rows whose logits nobody reads
  // Generation's one row of logits goes to the buffer's first row, whatever its position: written
  // at row T-1 (as it was until 2026-12-02), each new token touched a fresh 200 KB row of GPT-2's
  // logits, 200 MB resident after 1024 tokens, more than its key/value cache.
  float* logits_out = last_logits_only ? activations_.logits : model.logits;
  backend_.matmul_forward(logits_out, ln_f_out + size_t(skipped) * C, weights_.lm_head_weight,
                          weights_.lm_head_bias, rows - skipped, C, Vp);
  if (targets) {
    // loss = F.cross_entropy(logits.view(B*T, V), targets.view(B*T)), mean taken in mean_loss()
    backend_.cross_entropy_forward(model.losses, model.logits, model.targets, rows, V, Vp);
    backend_.sum(activations_.loss_sum, model.losses, static_cast<size_t>(rows));
  }
  last_B_ = B;
  last_T_ = T;
  last_had_targets_ = targets != nullptr && first_row == 0;
  last_logits_only_ = last_logits_only;
  logits_hold_their_gradient_ = false;
  last_dropout_ = dropout;
}

void GPT::plan_texts(int texts) {
  if (texts > activations_.B || activations_.T < shape_.block_size)
    plan(std::max(texts, activations_.B), shape_.block_size, activations_.with_gradients);
}

// Each layer's qkv holds text b's cached rows from row b * T of the plan (T = block_size, see
// plan_texts), stored as bf16 where the plan keeps qkv so.
void GPT::copy_cached_rows(int from, int to, int rows) {
  if (std::max(from, to) >= activations_.B || rows > activations_.T)
    throw Error("internal: the plan holds no such text's rows");
  const size_t QKV = 3 * static_cast<size_t>(shape_.attention_width()), T = activations_.T;
  const bool in_bf16 = activations_.qkv_in_bf16;
  for (const LayerActivations& block : activations_.layers)
    backend_.copy_device(bf16_rows(block.qkv, to * T, QKV, in_bf16),
                         bf16_rows(block.qkv, from * T, QKV, in_bf16),
                         rows * QKV * (in_bf16 ? 2 : 4));
}

size_t GPT::cache_bytes_per_text() const {
  const bool in_bf16 = backend_.keeps_as_bf16(ProductOperand::kQkv, shape_.head_size);
  return size_t(shape_.n_layer) * shape_.block_size * 3 * shape_.attention_width() *
         (in_bf16 ? 2 : 4);
}

// The rows of a step are the texts' new rows, one a text, in rows 0..texts-1 of every buffer but
// qkv (in an inference plan they are scratch, layer 0's, see activation_plan.h); so every
// row-wise op and product is the one forward() runs, over `texts` rows. Attention is not: each
// text's new row reads its own cache. So the new queries, keys and values go to next_qkv, each
// row is copied to the end of its text's cache, and attention runs text by text over that place
// (the op as forward() calls it for one sample's new row), its output copied into next_att.
void GPT::forward_next_tokens(const int32_t* tokens, int texts, int position) {
  if (texts > activations_.B || position >= activations_.T || activations_.T < shape_.block_size)
    throw Error("internal: plan_texts() first, and positions inside block_size");
  const int C = shape_.n_embd, A = shape_.attention_width(), Vp = shape_.padded_vocab_size;
  const int H = shape_.n_head, hs = shape_.head_size;
  const size_t QKV = 3 * static_cast<size_t>(A), T = activations_.T;
  const bool qkv_in_bf16 = activations_.qkv_in_bf16, att_in_bf16 = activations_.att_in_bf16;
  const ModelRows model = model_rows(activations_, 0, shape_);
  backend_.copy_to_device(model.tokens, tokens, texts * sizeof(int32_t));
  // texts "samples" of one row each, at `position`
  backend_.embedding_forward(model.embedded, model.tokens, weights_.token_embedding,
                             weights_.position_embedding, texts, 1, C, position);
  const NormTensors ln1 = norm_after(activations_, weights_, -1);
  backend_.layernorm_forward(ln1.out, ln1.mean, ln1.rstd, model.embedded, ln1.weight, ln1.bias,
                             texts, C, ln1.out_read_by);
  const float* x = model.embedded;
  const bool post_norm = shape_.block_order == BlockOrder::kPostNorm;
  for (int l = 0; l < shape_.n_layer; ++l) {
    LayerActivations& block = activations_.layers[l];
    const NormTensors ln = norm_after(activations_, weights_, l - 1);
    backend_.matmul_forward(activations_.next_qkv, ln.out, weights_.layers[l].qkv_weight,
                            weights_.layers[l].qkv_bias, texts, C, 3 * A);
    for (int b = 0; b < texts; ++b) {
      float* cache = bf16_rows(block.qkv, b * T, QKV, qkv_in_bf16);  // text b's place
      backend_.copy_device(bf16_rows(cache, position, QKV, qkv_in_bf16),
                           bf16_rows(activations_.next_qkv, b, QKV, qkv_in_bf16),
                           QKV * (qkv_in_bf16 ? 2 : 4));
      backend_.attention_forward(block.att, block.attention_saved, cache, 1, position + 1, H, hs,
                                 position, DropoutSpec{});
      backend_.copy_device(bf16_rows(activations_.next_att, b, A, att_in_bf16),
                           bf16_rows(block.att, position, A, att_in_bf16),
                           A * (att_in_bf16 ? 2 : 4));
    }
    block_after_attention(l, 0, activations_.next_att, post_norm ? ln.out : x, model.branch,
                          texts, texts, DropoutContext{});
    x = block_rows(activations_, l, 0, shape_).residual_out;
  }
  const float* ln_f_out = norm_after(activations_, weights_, shape_.n_layer - 1).out;
  backend_.matmul_forward(model.logits, ln_f_out, weights_.lm_head_weight, weights_.lm_head_bias,
                          texts, C, Vp);
  last_B_ = texts;  // logits_row(b, 0): text b's
  last_T_ = 1;
  last_had_targets_ = false;
  last_logits_only_ = false;
  logits_hold_their_gradient_ = false;
  last_dropout_ = DropoutContext{};
}

float GPT::mean_loss() const {
  float sum = 0.0f;
  backend_.copy_to_host(&sum, activations_.loss_sum, sizeof(float));
  return mean_of(sum);
}

float GPT::mean_of(float loss_sum) const {
  return loss_sum / static_cast<float>(last_B_ * last_T_);
}

void GPT::keep_loss_sum(float* slot) const {
  if (!last_had_targets_) throw Error("internal: keep_loss_sum() needs a forward() with targets");
  backend_.copy_device(slot, activations_.loss_sum, sizeof(float));
}

std::vector<float> GPT::mean_losses(const float* slots, size_t count) const {
  std::vector<float> means(count);
  backend_.copy_to_host(means.data(), slots, count * sizeof(float));
  for (float& mean : means) mean = mean_of(mean);
  return means;
}

void GPT::backward(float dloss, GradientUpdate update, const GradientsDone& done) {
  ActivationPlan& act = activations_;
  if (!act.with_gradients) throw Error("internal: plan(B, T, true) before training");
  if (!last_had_targets_) throw Error("internal: backward() needs a forward() with targets");
  if (logits_hold_their_gradient_) throw Error("internal: one backward() per forward()");
  float* all_gradients = gradients();  // allocated here when nothing asked for them before
  if (update == GradientUpdate::kWrite)
    for (const auto& [offset, count] : added_gradients_)
      backend_.fill_zero(all_gradients + offset, count * sizeof(float));
  const int B = last_B_, T = last_T_, BT = B * T;
  const int C = shape_.n_embd, A = shape_.attention_width(), F = shape_.hidden_width();
  const int H = shape_.n_head, hs = shape_.head_size;
  const int V = shape_.vocab_size, Vp = shape_.padded_vocab_size;
  const size_t per_sample = static_cast<size_t>(T) * C;
  const DropoutContext& dropout = last_dropout_;

  // logits = lm_head(ln_f(x)); the padded columns' gradient is zero, so are the padded rows'.
  // The gradient replaces the logits (d_logits is their memory), which nothing reads again.
  // d_logits is read by the lm_head's backward products alone
  backend_.cross_entropy_backward(act.d_logits, act.logits, act.targets, BT, V, Vp, dloss,
                                  ReadBy::kNextProduct);
  logits_hold_their_gradient_ = true;
  backend_.matmul_backward(act.d_ln, grads_.lm_head_weight, grads_.lm_head_bias, act.d_logits,
                           act.lnf, weights_.lm_head_weight, BT, C, Vp, update);
  backend_.fill_zero(act.d_residual, static_cast<size_t>(BT) * C * sizeof(float));
  // As in the forward pass, each LayerNorm runs fused with the residual add that produced its
  // input: the backward of the LayerNorm after block l (ln_f, or ln1 of block l + 1) goes on
  // into that block's feed-forward branch, leaving its gradient in d_branch.
  // post_norm: a LayerNorm's output feeds the next branch and the skip past it, so its gradient is
  // d_ln (from the branch) plus d_skip (from the skip). layernorm_backward is linear in its dout,
  // so it runs once on each, the skip first; and the LayerNorm's input feeds nothing else, so its
  // gradient starts from zero rather than from the residual stream's.
  const bool post_norm = shape_.block_order == BlockOrder::kPostNorm;
  auto skip_backward = [&](float* d_input, const float* d_skip, const float* input,
                           const float* weight, const float* mean, const float* rstd,
                           float* d_weight, float* d_bias) {
    backend_.fill_zero(d_input, static_cast<size_t>(BT) * C * sizeof(float));
    backend_.layernorm_backward(d_input, d_weight, d_bias, d_skip, input, weight, mean, rstd, BT,
                                C);
  };
  auto norm_backward = [&](int l, const float* d_skip) {
    const NormTensors norm = norm_after(act, weights_, l), grad = norm_after(act, grads_, l);
    if (d_skip != nullptr)
      skip_backward(act.d_residual, d_skip, l < 0 ? act.embedded : act.layers[l].residual_out,
                    norm.weight, norm.mean, norm.rstd, grad.weight, grad.bias);
    if (l < 0) {
      backend_.layernorm_backward(act.d_residual, grad.weight, grad.bias, act.d_ln, act.embedded,
                                  norm.weight, norm.mean, norm.rstd, BT, C);
      return;
    }
    backend_.layernorm_dropout_add_backward(act.d_residual, act.d_branch, grad.weight, grad.bias,
                                            act.d_ln, act.layers[l].residual_out, norm.weight,
                                            norm.mean, norm.rstd, B, per_sample, C,
                                            dropout.at(l, DropoutSite::kFeedForwardOutput));
  };
  norm_backward(shape_.n_layer - 1, nullptr);  // ln_f: its input feeds only it in either order

  for (int l = shape_.n_layer - 1; l >= 0; --l) {
    const LayerTensors& w = weights_.layers[l];
    const LayerTensors& g = grads_.layers[l];
    const LayerActivations& block = act.layers[l];
    // x = x + ffwd(ln2(x)) (post_norm: x + ffwd(x) after x = ln2(x)): d_residual flows through
    // unchanged, d_branch into the branch
    // GELU's output was not kept (activation_plan.h): recomputed from fc for fc2's weight gradient
    if (act.recomputes && !act.relu_in_place)
      backend_.activation_forward(block.fc_act, block.fc, static_cast<size_t>(BT) * F,
                                  shape_.activation, act.fc_act_read_by());
    // fc2's backward products, then the activation's backward in place (d_fc holds fc_act's
    // gradient, then fc's); block.fc is ReLU's output for ReLU models (relu_in_place). d_fc is
    // read by fc's backward product alone (as its output gradient).
    backend_.matmul_backward_into_activation(act.d_fc, g.fc2_weight, g.fc2_bias, act.d_branch,
                                             block.fc_act, w.fc2_weight, block.fc, BT, F, C, update,
                                             shape_.activation, ReadBy::kNextProduct);
    // ln2's output was not kept (activation_plan.h): recomputed for fc's weight gradient
    if (act.recomputes)
      backend_.layernorm_forward(block.ln2, block.ln2_mean, block.ln2_rstd, block.residual_mid,
                                 w.ln2_weight, w.ln2_bias, BT, C, act.block_ln_read_by());
    backend_.matmul_backward(act.d_ln, g.fc_weight, g.fc_bias, act.d_fc, block.ln2, w.fc_weight, BT,
                             C, F, update);
    // pre_norm: the stream's gradient d_residual gains ln2's; post_norm: ln2's output fed the
    // skip (d_residual) too, and its input's gradient goes to d_residual_mid
    float* d_mid = post_norm ? act.d_residual_mid : act.d_residual;
    if (post_norm)
      skip_backward(d_mid, act.d_residual, block.residual_mid, w.ln2_weight, block.ln2_mean,
                    block.ln2_rstd, g.ln2_weight, g.ln2_bias);
    backend_.layernorm_dropout_add_backward(d_mid, act.d_branch, g.ln2_weight, g.ln2_bias, act.d_ln,
                                            block.residual_mid, w.ln2_weight, block.ln2_mean,
                                            block.ln2_rstd, B, per_sample, C,
                                            dropout.at(l, DropoutSite::kAttentionOutput));
    // x = x + sa(ln1(x)), or post_norm's x = x + sa(x) after x = ln1(x)
    backend_.matmul_backward(act.d_att, g.proj_weight, g.proj_bias, act.d_branch, block.att,
                             w.proj_weight, BT, A, C, update);
    // d_qkv is read by the qkv layer's backward products alone
    backend_.attention_backward(act.d_qkv, act.d_att, block.qkv, block.attention_saved, B, T, H, hs,
                                dropout.at(l, DropoutSite::kAttentionWeights),
                                ReadBy::kNextProduct);
    // and ln1's for qkv's, from the block's input
    if (act.recomputes)
      backend_.layernorm_forward(block.ln1, block.ln1_mean, block.ln1_rstd,
                                 l == 0 ? act.embedded : act.layers[l - 1].residual_out,
                                 w.ln1_weight, w.ln1_bias, BT, C, act.block_ln_read_by());
    backend_.matmul_backward(act.d_ln, g.qkv_weight, g.qkv_bias, act.d_qkv, block.ln1, w.qkv_weight,
                             BT, C, 3 * A, update);
    // ln1, fused with the previous block's feed-forward add
    norm_backward(l - 1, post_norm ? act.d_residual_mid : nullptr);
    // the block's gradients are all written (its ln1's last)
    if (done)
      for (const auto& [offset, count] : block_gradients_[l]) done(offset, count);
  }
  // through the embedding dropout, in place; then
  // x = token_embedding_table(idx) + position_embedding_table(arange(T))
  const DropoutSpec embedding_dropout = dropout.at_embedding();
  if (embedding_dropout.active())
    backend_.dropout_add_backward(act.d_residual, act.d_residual, B, per_sample, embedding_dropout);
  backend_.embedding_backward(grads_.token_embedding, grads_.position_embedding, act.d_residual,
                              act.tokens, B, T, C);
  if (done)
    for (const auto& [offset, count] : other_gradients_) done(offset, count);
}

std::vector<std::pair<size_t, size_t>> GPT::gradients_in_backward_order() const {
  std::vector<std::pair<size_t, size_t>> order;
  for (int l = shape_.n_layer - 1; l >= 0; --l)
    order.insert(order.end(), block_gradients_[l].begin(), block_gradients_[l].end());
  order.insert(order.end(), other_gradients_.begin(), other_gradients_.end());
  return order;
}

void GPT::check_logits_readable() const {
  if (logits_hold_their_gradient_)
    throw Error("internal: the logits were replaced by their gradient in backward(): read them "
                "before it");
}

std::vector<float> GPT::logits_row(int b, int t) const {
  check_logits_readable();
  const int V = shape_.vocab_size, Vp = shape_.padded_vocab_size;
  std::vector<float> row(V);  // the vocabulary's columns only: padding is never sampled
  if (last_logits_only_ && t != last_T_ - 1)
    throw Error("internal: a forward of the last row's logits alone has no logits for row " +
                std::to_string(t));
  const size_t buffer_row = last_logits_only_ ? static_cast<size_t>(b)  // forward's first row
                                              : static_cast<size_t>(b) * last_T_ + t;
  backend_.copy_to_host(row.data(), activations_.logits + buffer_row * Vp, V * sizeof(float));
  return row;
}

std::vector<float> GPT::read_logits() const {
  check_logits_readable();
  if (last_logits_only_)
    throw Error("internal: a forward of the last row's logits alone has no (B, T, V) logits");
  const size_t V = shape_.vocab_size, Vp = shape_.padded_vocab_size;
  const size_t rows = static_cast<size_t>(last_B_) * last_T_;
  std::vector<float> logits(rows * Vp);
  backend_.copy_to_host(logits.data(), activations_.logits, logits.size() * sizeof(float));
  for (size_t r = 1; r < rows && Vp != V; ++r)  // drop the padded columns, in place
    std::copy(logits.begin() + r * Vp, logits.begin() + r * Vp + V, logits.begin() + r * V);
  logits.resize(rows * V);
  return logits;
}

std::vector<float> GPT::read_feed_forward_hidden(int layer) const {
  if (layer < 0 || layer >= shape_.n_layer)
    throw Error("internal: no block " + std::to_string(layer));
  if (!activations_.with_gradients)  // inference plans share one fc among all layers
    throw Error("internal: per-layer activations are kept only when training");
  std::vector<float> fc(static_cast<size_t>(last_B_) * last_T_ * shape_.hidden_width());
  if (!activations_.fc_in_bf16) {
    backend_.copy_to_host(fc.data(), activations_.layers[layer].fc, fc.size() * sizeof(float));
    return fc;
  }
  std::vector<uint16_t> kept(fc.size());  // bf16: the upper half of each fp32 value
  backend_.copy_to_host(kept.data(), activations_.layers[layer].fc, kept.size() * sizeof(uint16_t));
  for (size_t i = 0; i < fc.size(); ++i) {
    const uint32_t bits = uint32_t{kept[i]} << 16;
    std::memcpy(&fc[i], &bits, sizeof(float));
  }
  return fc;
}

}  // namespace folio
