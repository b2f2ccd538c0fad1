#include "model/parameter_layout.h"

namespace folio {

ParameterLayout::ParameterLayout(const ModelShape& s) {
  const int C = s.n_embd, A = s.attention_width(), F = s.hidden_width();
  // 2-D tensors first.
  add("token_embedding_table.weight", {s.vocab_size, C}, InitKind::kEmbedding);
  add("position_embedding_table.weight", {s.block_size, C}, InitKind::kEmbedding);
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "blocks." + std::to_string(l) + ".";
    add(p + "sa.qkv.weight", {3 * A, C}, InitKind::kLinearWeight, C);
    add(p + "sa.proj.weight", {C, A}, InitKind::kResidualWeight, A);
    add(p + "ffwd.net.0.weight", {F, C}, InitKind::kLinearWeight, C);
    add(p + "ffwd.net.2.weight", {C, F}, InitKind::kResidualWeight, F);
  }
  if (!s.tie_weights) add("lm_head.weight", {s.vocab_size, C}, InitKind::kLinearWeight, C);
  matrix_total_ = total_;
  // Then 1-D tensors.
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "blocks." + std::to_string(l) + ".";
    add(p + "ln1.weight", {C}, InitKind::kNormWeight);
    if (s.bias) add(p + "ln1.bias", {C}, InitKind::kNormBias);
    if (s.qkv_bias) add(p + "sa.qkv.bias", {3 * A}, InitKind::kLinearBias, C);
    if (s.bias) add(p + "sa.proj.bias", {C}, InitKind::kLinearBias, A);
    add(p + "ln2.weight", {C}, InitKind::kNormWeight);
    if (s.bias) add(p + "ln2.bias", {C}, InitKind::kNormBias);
    if (s.bias) add(p + "ffwd.net.0.bias", {F}, InitKind::kLinearBias, C);
    if (s.bias) add(p + "ffwd.net.2.bias", {C}, InitKind::kLinearBias, F);
  }
  add("ln_f.weight", {C}, InitKind::kNormWeight);
  if (s.bias) add("ln_f.bias", {C}, InitKind::kNormBias);
  if (s.bias) add("lm_head.bias", {s.vocab_size}, InitKind::kLinearBias, C);
}

void ParameterLayout::add(const std::string& name, std::vector<int> shape, InitKind init,
                          int fan_in) {
  size_t size = 1;
  for (int d : shape) size *= static_cast<size_t>(d);
  tensors_.push_back({name, std::move(shape), total_, size, init, fan_in});
  total_ += size;
}

const ParameterTensor* ParameterLayout::find(const std::string& name) const {
  for (const ParameterTensor& tensor : tensors_)
    if (tensor.name == name) return &tensor;
  return nullptr;
}

const ParameterTensor& ParameterLayout::at(const std::string& name) const {
  const ParameterTensor* tensor = find(name);
  if (tensor == nullptr) throw Error("internal: no parameter tensor named " + name);
  return *tensor;
}

ModelTensors bind_tensors(const ParameterLayout& layout, const ModelShape& shape, float* base) {
  auto pointer = [&](const std::string& name) -> float* {
    const ParameterTensor* tensor = layout.find(name);
    return tensor ? base + tensor->offset : nullptr;
  };
  ModelTensors t;
  t.token_embedding = pointer("token_embedding_table.weight");
  t.position_embedding = pointer("position_embedding_table.weight");
  for (int l = 0; l < shape.n_layer; ++l) {
    const std::string p = "blocks." + std::to_string(l) + ".";
    t.layers.push_back(LayerTensors{
        pointer(p + "ln1.weight"), pointer(p + "ln1.bias"), pointer(p + "sa.qkv.weight"),
        pointer(p + "sa.qkv.bias"), pointer(p + "sa.proj.weight"), pointer(p + "sa.proj.bias"), pointer(p + "ln2.weight"),
        pointer(p + "ln2.bias"), pointer(p + "ffwd.net.0.weight"), pointer(p + "ffwd.net.0.bias"),
        pointer(p + "ffwd.net.2.weight"), pointer(p + "ffwd.net.2.bias")});
  }
  t.lnf_weight = pointer("ln_f.weight");
  t.lnf_bias = pointer("ln_f.bias");
  t.lm_head_weight = shape.tie_weights ? t.token_embedding : pointer("lm_head.weight");
  t.lm_head_bias = pointer("lm_head.bias");
  return t;
}

}  // namespace folio
