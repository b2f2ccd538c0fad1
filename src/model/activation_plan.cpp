#include "model/activation_plan.h"

#include <algorithm>
#include <limits>

namespace folio {

namespace {

// Hands out aligned slices of one allocation; first pass counts, second pass assigns.
class Carver {
 public:
  explicit Carver(char* base) : base_(base) {}
  template <typename T>
  T* take(size_t count) {
    constexpr size_t kAlignment = 256;
    offset_ = (offset_ + kAlignment - 1) / kAlignment * kAlignment;
    T* pointer = base_ ? reinterpret_cast<T*>(base_ + offset_) : nullptr;
    offset_ += count * sizeof(T);
    return pointer;
  }
  size_t used() const { return offset_; }

 private:
  char* base_;
  size_t offset_ = 0;
};

void carve(ActivationPlan& p, Carver& c, const ModelShape& s, const Backend& backend) {
  const size_t BT = size_t(p.B) * p.T, C = s.n_embd, A = s.attention_width(), F = s.hidden_width(),
               V = s.padded_vocab_size;  // logits rows: padded
  p.tokens = c.take<int32_t>(BT);
  p.targets = c.take<int32_t>(BT);
  p.embedded = c.take<float>(BT * C);
  p.layers.resize(s.n_layer);
  // A tensor kept as bf16 (activation_plan.h): 2 bytes an element, named float* like the rest.
  const auto bf16_tensor = [&](size_t count) {
    return reinterpret_cast<float*>(c.take<uint16_t>(count));
  };
  // Training that recomputes: every layer's ln1 output shares one buffer, every ln2 output
  // another (two, so that post_norm's fused add + LayerNorm never reads and writes one buffer),
  // and GELU's output a third (ReLU's is fc itself, in place); backward() refills each before
  // the product that reads it.
  const bool shared = p.with_gradients && p.recomputes;
  float* shared_ln1 = shared ? c.take<float>(BT * C) : nullptr;
  float* shared_ln2 = shared ? c.take<float>(BT * C) : nullptr;
  float* shared_fc_act = shared && !p.relu_in_place ? c.take<float>(BT * F) : nullptr;
  for (size_t i = 0; i < p.layers.size(); ++i) {
    LayerActivations& l = p.layers[i];
    // each layer's own: the key/value cache of generation
    l.qkv = p.qkv_in_bf16 ? bf16_tensor(BT * 3 * A) : c.take<float>(BT * 3 * A);
    if (!p.with_gradients && i > 0) {   // inference: the rest is layer 0's (see activation_plan.h)
      float* qkv = l.qkv;
      l = p.layers[0];
      l.qkv = qkv;
      continue;
    }
    const auto ln_tensor = [&] {
      return p.ln_in_bf16 ? bf16_tensor(BT * C) : c.take<float>(BT * C);
    };
    l.ln1 = shared ? shared_ln1 : ln_tensor();
    l.ln1_mean = c.take<float>(BT);
    l.ln1_rstd = c.take<float>(BT);
    l.attention_saved =
        c.take<float>(backend.attention_saved_floats(p.B, p.T, s.n_head, s.head_size));
    l.att = p.att_in_bf16 ? bf16_tensor(BT * A) : c.take<float>(BT * A);
    l.residual_mid = c.take<float>(BT * C);
    l.ln2 = shared ? shared_ln2 : ln_tensor();
    l.ln2_mean = c.take<float>(BT);
    l.ln2_rstd = c.take<float>(BT);
    l.fc = p.fc_in_bf16 ? bf16_tensor(BT * F) : c.take<float>(BT * F);
    l.fc_act = p.relu_in_place    ? l.fc
               : shared           ? shared_fc_act
               : p.fc_act_in_bf16 ? bf16_tensor(BT * F)
                                  : c.take<float>(BT * F);
    l.residual_out = c.take<float>(BT * C);
  }
  p.lnf = c.take<float>(BT * C);
  p.lnf_mean = c.take<float>(BT);
  p.lnf_rstd = c.take<float>(BT);
  p.logits = c.take<float>(BT * V);
  p.losses = c.take<float>(BT);
  p.loss_sum = c.take<float>(1);
  p.branch = c.take<float>(BT * C);
  p.next_qkv = p.qkv_in_bf16 ? bf16_tensor(size_t(p.B) * 3 * A) : c.take<float>(size_t(p.B) * 3 * A);
  p.next_att = p.att_in_bf16 ? bf16_tensor(size_t(p.B) * A) : c.take<float>(size_t(p.B) * A);
  if (p.with_gradients) {
    // Gradients that are never live at once share memory (see the order of GPT::backward):
    // the logits' gradient replaces the logits (cross_entropy_backward runs in place), read by the
    // lm_head's product before any block's gradient is written; a block's d_fc is read before
    // its d_qkv is written; d_att is read (by attention's backward) before d_ln is written, and
    // d_ln before the next d_att; branch belongs to the forward pass, d_branch to the backward.
    p.d_residual = c.take<float>(BT * C);
    if (s.block_order == BlockOrder::kPostNorm) p.d_residual_mid = c.take<float>(BT * C);
    p.d_ln = c.take<float>(BT * std::max(C, A));
    p.d_att = p.d_ln;
    p.d_branch = p.branch;
    // fc_act's gradient, replaced in place by fc's (each element's through the nonlinearity)
    p.d_fc = c.take<float>(BT * std::max(F, 3 * A));
    p.d_qkv = p.d_fc;
    p.d_logits = p.logits;
  }
}

}  // namespace

ActivationPlan plan_activations(Backend& backend, const ModelShape& shape, int B, int T,
                                bool with_gradients) {
  ActivationPlan plan;
  plan.B = B;
  plan.T = T;
  plan.with_gradients = with_gradients;
  plan.relu_in_place = shape.activation == Activation::kRelu;
  plan.post_norm = shape.block_order == BlockOrder::kPostNorm;
  // Inference plans keep the rest in fp32 (there each tensor is read once, and all layers but
  // qkv share layer 0's), but qkv as bf16 too: it is generation's key/value cache, which every
  // new token reads whole, so bf16 halves the cache's memory and the bytes a token reads.
  const auto in_bf16 = [&](ProductOperand tensor) {
    return backend.keeps_as_bf16(tensor, shape.head_size);
  };
  // What keeping every layer's LayerNorm and GELU outputs would take, for the backend to weigh
  // against recomputing them. post_norm's LayerNorm outputs are the residual stream, which other
  // ops read: kept in fp32.
  const size_t rows = size_t(B) * T, C = shape.n_embd, F = shape.hidden_width();
  const bool ln_in_bf16 = !plan.post_norm && in_bf16(ProductOperand::kLayerNormOutput);
  const bool fc_act_in_bf16 = !plan.relu_in_place && in_bf16(ProductOperand::kGeluOutput);
  const size_t kept_bytes =
      shape.n_layer * rows *
      (2 * C * (ln_in_bf16 ? 2 : 4) + (plan.relu_in_place ? 0 : F * (fc_act_in_bf16 ? 2 : 4)));
  // An inference plan keeps nothing for a backward pass, and each of these outputs is read by the
  // one product after it: it takes a recomputing plan's readers (ReadBy::kNextProduct, the CPU's
  // bf16 copy alone) wherever the backend would recompute a large model's.
  plan.recomputes = !backend.keeps_recomputable_activations(
      with_gradients ? kept_bytes : std::numeric_limits<size_t>::max());
  plan.ln_in_bf16 = with_gradients && !plan.recomputes && ln_in_bf16;
  plan.fc_act_in_bf16 = with_gradients && !plan.recomputes && fc_act_in_bf16;
  plan.fc_in_bf16 = with_gradients && plan.relu_in_place && in_bf16(ProductOperand::kReluOutput);
  plan.qkv_in_bf16 = in_bf16(ProductOperand::kQkv);
  plan.att_in_bf16 = with_gradients && in_bf16(ProductOperand::kAttentionOutput);
  Carver counter(nullptr);
  carve(plan, counter, shape, backend);
  plan.memory = DeviceBuffer(backend, counter.used());
  Carver carver(plan.memory.as<char>());
  carve(plan, carver, shape, backend);
  const size_t A = shape.attention_width();
  for (const LayerActivations& layer : plan.layers) {
    if (plan.fc_in_bf16) backend.store_as_bf16(layer.fc, rows * F);
    if (plan.qkv_in_bf16) backend.store_as_bf16(layer.qkv, rows * 3 * A);
    if (plan.att_in_bf16) backend.store_as_bf16(layer.att, rows * A);
    if (plan.ln_in_bf16) {
      backend.store_as_bf16(layer.ln1, rows * C);
      backend.store_as_bf16(layer.ln2, rows * C);
    }
    if (plan.fc_act_in_bf16) backend.store_as_bf16(layer.fc_act, rows * F);
  }
  if (plan.qkv_in_bf16) backend.store_as_bf16(plan.next_qkv, size_t(B) * 3 * A);
  if (plan.att_in_bf16) backend.store_as_bf16(plan.next_att, size_t(B) * A);
  return plan;
}

}  // namespace folio
