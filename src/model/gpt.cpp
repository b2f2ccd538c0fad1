#include "model/gpt.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "core/philox.h"

namespace folio {

namespace {

// A LayerNorm's output and saved row statistics, and its weight and bias (or their gradients).
struct NormTensors {
  float *out, *mean, *rstd;
  float *weight, *bias;
};

// The LayerNorm that reads the residual stream after block l: ln1 of block l + 1, or ln_f after
// the last block (l = -1: the first block's ln1, which reads the embeddings).
NormTensors norm_after(ActivationPlan& a, const ModelTensors& tensors, int l) {
  if (l + 1 < static_cast<int>(a.layers.size())) {
    LayerActivations& next = a.layers[l + 1];
    const LayerTensors& t = tensors.layers[l + 1];
    return {next.ln1, next.ln1_mean, next.ln1_rstd, t.ln1_weight, t.ln1_bias};
  }
  return {a.lnf, a.lnf_mean, a.lnf_rstd, tensors.lnf_weight, tensors.lnf_bias};
}

}  // namespace

GPT::GPT(Backend& backend, const ModelShape& shape)
    : backend_(backend), shape_(shape), layout_(shape),
      parameters_(backend, layout_.total() * sizeof(float)),
      gradients_(backend, layout_.total() * sizeof(float)) {
  weights_ = bind_tensors(layout_, shape_, parameters());
  grads_ = bind_tensors(layout_, shape_, gradients());
  backend_.fill_zero(parameters(), layout_.total() * sizeof(float));
  zero_gradients();
  backend_.set_parameter_buffer(parameters(), layout_.total());  // a GPU keeps a bf16 mirror
}

void GPT::initialize(uint64_t seed, double init_std, bool scaled_residual_init) {
  std::vector<float> host(layout_.total());
  const double residual_std =
      scaled_residual_init ? init_std / std::sqrt(2.0 * shape_.n_layer) : init_std;
  for (size_t index = 0; index < layout_.tensors().size(); ++index) {
    const ParameterTensor& tensor = layout_.tensors()[index];
    float* values = host.data() + tensor.offset;
    if (tensor.init == InitKind::kZeros || tensor.init == InitKind::kOnes) {
      std::fill(values, values + tensor.size, tensor.init == InitKind::kOnes ? 1.0f : 0.0f);
      continue;
    }
    // Box-Muller on pairs of Philox words; each tensor has its own stream (item = its index).
    const double stddev = tensor.init == InitKind::kScaledNormal ? residual_std : init_std;
    const RandomStream stream =
        make_stream(seed, RandomPurpose::kInit, 0, static_cast<uint32_t>(index));
    for (size_t i = 0; i < tensor.size; i += 2) {
      const PhiloxBlock block = stream.block(static_cast<uint32_t>(i / 4));
      const int lane = static_cast<int>(i % 4);
      const double u1 = (block.word[lane] + 1.0) / 4294967296.0;  // (0, 1]
      const double u2 = block.word[lane + 1] / 4294967296.0;      // [0, 1)
      const double radius = std::sqrt(-2.0 * std::log(u1)) * stddev;
      values[i] = static_cast<float>(radius * std::cos(2.0 * M_PI * u2));
      if (i + 1 < tensor.size) values[i + 1] = static_cast<float>(radius * std::sin(2.0 * M_PI * u2));
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

std::vector<float> GPT::read_gradients() const {
  std::vector<float> host(layout_.total());
  backend_.copy_to_host(host.data(), gradients(), host.size() * sizeof(float));
  return host;
}

void GPT::zero_gradients() { backend_.fill_zero(gradients(), layout_.total() * sizeof(float)); }

void GPT::plan(int B, int T, bool with_gradients) {
  if (T > shape_.block_size)
    throw Error("internal: sequence of " + std::to_string(T) + " tokens exceeds block_size");
  activations_ = ActivationPlan();  // free the old plan before taking memory for the new one
  activations_ = plan_activations(backend_, shape_, B, T, with_gradients);
}

void GPT::forward(const int32_t* tokens, const int32_t* targets, int B, int T,
                  const DropoutContext& dropout, int first_row) {
  ActivationPlan& a = activations_;
  if (first_row > 0 && (B != 1 || T > a.T))
    throw Error("internal: the key/value cache needs B = 1 and planned activations");
  // Plan for whole windows at once, so that a growing generation context never re-plans (which
  // would drop the cached rows).
  if (B > a.B || T > a.T) plan(std::max(B, a.B), shape_.block_size, a.with_gradients);
  // Each op below works on rows first_row..T-1 of the (single) sample when first_row > 0.
  const int C = shape_.n_embd, A = shape_.attention_width(), F = shape_.hidden_width();
  const int H = shape_.n_head, hs = shape_.head_size, V = shape_.vocab_size;
  const int rows = B * T - first_row;  // rows computed by the row-wise ops
  const size_t r0 = static_cast<size_t>(first_row);
  Backend& k = backend_;

  k.copy_to_device(a.tokens + r0, tokens + r0, rows * sizeof(int32_t));
  if (targets) k.copy_to_device(a.targets + r0, targets + r0, rows * sizeof(int32_t));

  // x = token_embedding_table(idx) + position_embedding_table(arange(T))
  k.embedding_forward(a.embedded + r0 * C, a.tokens + r0, weights_.token_embedding,
                      weights_.position_embedding, B, T - first_row, C, first_row);
  const float* x = a.embedded;
  const size_t per_sample = static_cast<size_t>(T - first_row) * C;
  // Each residual add runs fused with the LayerNorm that reads its result: ln2 inside a block, and
  // the next block's ln1 (ln_f after the last block) at its end; only the first ln1 runs alone.
  const NormTensors first = norm_after(a, weights_, -1);
  k.layernorm_forward(first.out + r0 * C, first.mean + r0, first.rstd + r0, x + r0 * C,
                      first.weight, first.bias, rows, C);
  for (int l = 0; l < shape_.n_layer; ++l) {
    const LayerTensors& w = weights_.layers[l];
    LayerActivations& act = a.layers[l];
    // x = x + sa(ln1(x)); sa = dropout(proj(concat of heads)), each head dropout on its weights
    k.matmul_forward(act.qkv + r0 * 3 * A, act.ln1 + r0 * C, w.qkv_weight, nullptr, rows, C,
                     3 * A);
    k.attention_forward(act.att, act.attention_saved, act.qkv, B, T, H, hs, first_row,
                        dropout.at(l, DropoutSite::kAttentionWeights));
    k.matmul_forward(a.branch + r0 * C, act.att + r0 * A, w.proj_weight, w.proj_bias, rows, A, C);
    k.dropout_add_layernorm_forward(act.residual_mid + r0 * C, act.ln2 + r0 * C, act.ln2_mean + r0,
                                    act.ln2_rstd + r0, x + r0 * C, a.branch + r0 * C,
                                    w.ln2_weight, w.ln2_bias, B, per_sample, C,
                                    dropout.at(l, DropoutSite::kAttentionOutput));
    // x = x + ffwd(ln2(x)); ffwd = dropout(net.2(act(net.0(.)))); then the next LayerNorm
    k.matmul_activation_forward(act.fc + r0 * F, act.fc_act + r0 * F, act.ln2 + r0 * C, w.fc_weight,
                                w.fc_bias, rows, C, F, shape_.activation);
    k.matmul_forward(a.branch + r0 * C, act.fc_act + r0 * F, w.fc2_weight, w.fc2_bias, rows, F, C);
    const NormTensors next = norm_after(a, weights_, l);
    k.dropout_add_layernorm_forward(act.residual_out + r0 * C, next.out + r0 * C, next.mean + r0,
                                    next.rstd + r0, act.residual_mid + r0 * C, a.branch + r0 * C,
                                    next.weight, next.bias, B, per_sample, C,
                                    dropout.at(l, DropoutSite::kFeedForwardOutput));
    x = act.residual_out;
  }
  // logits = lm_head(ln_f(x)), ln_f having run with the last residual add
  k.matmul_forward(a.logits + r0 * V, a.lnf + r0 * C, weights_.lm_head_weight,
                   weights_.lm_head_bias, rows, C, V);
  if (targets) {
    // loss = F.cross_entropy(logits.view(B*T, V), targets.view(B*T)), mean taken in mean_loss()
    k.cross_entropy_forward(a.losses + r0, a.logits + r0 * V, a.targets + r0, rows, V);
    k.sum(a.loss_sum, a.losses + r0, static_cast<size_t>(rows));
  }
  last_B_ = B;
  last_T_ = T;
  last_had_targets_ = targets != nullptr && first_row == 0;
  last_dropout_ = dropout;
}

float GPT::mean_loss() const {
  float sum = 0.0f;
  backend_.copy_to_host(&sum, activations_.loss_sum, sizeof(float));
  return sum / static_cast<float>(last_B_ * last_T_);
}

void GPT::backward(float dloss) {
  ActivationPlan& a = activations_;
  if (!a.with_gradients) throw Error("internal: plan(B, T, true) before training");
  if (!last_had_targets_) throw Error("internal: backward() needs a forward() with targets");
  const int B = last_B_, T = last_T_, BT = B * T;
  const int C = shape_.n_embd, A = shape_.attention_width(), F = shape_.hidden_width();
  const int H = shape_.n_head, hs = shape_.head_size, V = shape_.vocab_size;
  const size_t per_sample = static_cast<size_t>(T) * C;
  const DropoutContext& dropout = last_dropout_;
  Backend& k = backend_;

  // logits = lm_head(ln_f(x))
  k.cross_entropy_backward(a.d_logits, a.logits, a.targets, BT, V, dloss);
  k.matmul_backward(a.d_ln, grads_.lm_head_weight, grads_.lm_head_bias, a.d_logits, a.lnf,
                    weights_.lm_head_weight, BT, C, V);
  k.fill_zero(a.d_residual, static_cast<size_t>(BT) * C * sizeof(float));
  // As in the forward pass, each LayerNorm runs fused with the residual add that produced its
  // input: the backward of the LayerNorm after block l (ln_f, or ln1 of block l + 1) goes on
  // into that block's feed-forward branch, leaving its gradient in d_branch.
  auto norm_backward = [&](int l) {
    const NormTensors norm = norm_after(a, weights_, l), grad = norm_after(a, grads_, l);
    if (l < 0) {
      k.layernorm_backward(a.d_residual, grad.weight, grad.bias, a.d_ln, a.embedded, norm.weight,
                           norm.mean, norm.rstd, BT, C);
      return;
    }
    k.layernorm_dropout_add_backward(a.d_residual, a.d_branch, grad.weight, grad.bias, a.d_ln,
                                     a.layers[l].residual_out, norm.weight, norm.mean, norm.rstd,
                                     B, per_sample, C,
                                     dropout.at(l, DropoutSite::kFeedForwardOutput));
  };
  norm_backward(shape_.n_layer - 1);  // ln_f

  for (int l = shape_.n_layer - 1; l >= 0; --l) {
    const LayerTensors& w = weights_.layers[l];
    const LayerTensors& g = grads_.layers[l];
    const LayerActivations& act = a.layers[l];
    // x = x + ffwd(ln2(x)): d_residual flows through unchanged, d_branch into the branch
    k.matmul_backward(a.d_fc_act, g.fc2_weight, g.fc2_bias, a.d_branch, act.fc_act, w.fc2_weight,
                      BT, F, C);
    k.activation_backward(a.d_fc, a.d_fc_act, act.fc, static_cast<size_t>(BT) * F,
                          shape_.activation);
    k.matmul_backward(a.d_ln, g.fc_weight, g.fc_bias, a.d_fc, act.ln2, w.fc_weight, BT, C, F);
    k.layernorm_dropout_add_backward(a.d_residual, a.d_branch, g.ln2_weight, g.ln2_bias, a.d_ln,
                                     act.residual_mid, w.ln2_weight, act.ln2_mean, act.ln2_rstd,
                                     B, per_sample, C,
                                     dropout.at(l, DropoutSite::kAttentionOutput));
    // x = x + sa(ln1(x))
    k.matmul_backward(a.d_att, g.proj_weight, g.proj_bias, a.d_branch, act.att, w.proj_weight, BT,
                      A, C);
    k.attention_backward(a.d_qkv, a.d_att, act.qkv, act.attention_saved, B, T, H, hs,
                         dropout.at(l, DropoutSite::kAttentionWeights));
    k.matmul_backward(a.d_ln, g.qkv_weight, nullptr, a.d_qkv, act.ln1, w.qkv_weight, BT, C,
                      3 * A);
    norm_backward(l - 1);  // ln1, fused with the previous block's feed-forward add
  }
  // x = token_embedding_table(idx) + position_embedding_table(arange(T))
  k.embedding_backward(grads_.token_embedding, grads_.position_embedding, a.d_residual, a.tokens,
                       B, T, C);
}

std::vector<float> GPT::logits_row(int b, int t) const {
  const int V = shape_.vocab_size;
  std::vector<float> row(V);
  backend_.copy_to_host(row.data(),
                        activations_.logits + (static_cast<size_t>(b) * last_T_ + t) * V,
                        V * sizeof(float));
  return row;
}

std::vector<float> GPT::read_logits() const {
  std::vector<float> logits(static_cast<size_t>(last_B_) * last_T_ * shape_.vocab_size);
  backend_.copy_to_host(logits.data(), activations_.logits, logits.size() * sizeof(float));
  return logits;
}

std::vector<float> GPT::read_feed_forward_preactivations(int layer) const {
  if (layer < 0 || layer >= shape_.n_layer) throw Error("internal: no block " + std::to_string(layer));
  std::vector<float> fc(static_cast<size_t>(last_B_) * last_T_ * shape_.hidden_width());
  backend_.copy_to_host(fc.data(), activations_.layers[layer].fc, fc.size() * sizeof(float));
  return fc;
}

}  // namespace folio
