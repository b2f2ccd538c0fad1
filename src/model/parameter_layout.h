// Where each parameter tensor lives in the one flat fp32 buffer (gradients and AdamW moments use
// the same layout in buffers of their own).
//
// Tensors are named as seed 000's PyTorch state_dict names them, except that each block's
// per-head key/query/value matrices are stored fused as `blocks.{i}.sa.qkv.weight` (3A, C):
// queries, then keys, then values, head h at rows [h*hs, (h+1)*hs) of each third (and their
// biases, with qkv_bias, as `blocks.{i}.sa.qkv.bias` (3A)).
// model/torch_names.cpp maps to and from the per-head names when files are read or written.
//
// All 2-D tensors (embeddings, matrices) come first, then all 1-D tensors (biases, LayerNorm
// parameters): nanoGPT's "weight decay on matrices only" is then one contiguous range.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "model/model_shape.h"

namespace folio {

// How a tensor is initialised, by what it is (GPT::initialize; config keys init, init_std,
// scaled_residual_init). fan_in is the input width of the Linear layer a weight or bias belongs to.
enum class InitKind {
  kEmbedding,       // normal: N(0, init_std); torch_default: N(0, 1) (nn.Embedding)
  kLinearWeight,    // normal: N(0, init_std); torch_default: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
  kResidualWeight,  // as kLinearWeight; with scaled_residual_init N(0, init_std / sqrt(2 n_layer))
  kLinearBias,      // normal: 0; torch_default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (nn.Linear)
  kNormWeight,      // 1 (LayerNorm)
  kNormBias,        // 0 (LayerNorm)
};

struct ParameterTensor {
  std::string name;
  std::vector<int> shape;
  size_t offset = 0;  // in floats, from the start of the flat buffer
  size_t size = 0;
  InitKind init = InitKind::kLinearWeight;
  int fan_in = 0;  // Linear weights and biases: the layer's input width
  bool is_matrix() const { return shape.size() == 2; }
};

class ParameterLayout {
 public:
  explicit ParameterLayout(const ModelShape& shape);

  const std::vector<ParameterTensor>& tensors() const { return tensors_; }
  size_t total() const { return total_; }
  size_t matrix_total() const { return matrix_total_; }  // floats in the leading 2-D tensors
  // The tensor of that name, or nullptr.
  const ParameterTensor* find(const std::string& name) const;
  const ParameterTensor& at(const std::string& name) const;  // throws if absent

 private:
  void add(const std::string& name, std::vector<int> shape, InitKind init, int fan_in = 0);
  std::vector<ParameterTensor> tensors_;
  size_t total_ = 0, matrix_total_ = 0;
};

// Pointers into a flat buffer laid out as above (parameters, or gradients).
struct LayerTensors {
  float *ln1_weight, *ln1_bias;      // (C), (C) or null
  float *qkv_weight, *qkv_bias;      // (3A, C), (3A) or null (qkv_bias)
  float *proj_weight, *proj_bias;    // (C, A), (C) or null
  float *ln2_weight, *ln2_bias;      // (C), (C) or null
  float *fc_weight, *fc_bias;        // (4C, C), (4C) or null
  float *fc2_weight, *fc2_bias;      // (C, 4C), (C) or null
};

struct ModelTensors {
  float* token_embedding;     // (V, C)
  float* position_embedding;  // (block_size, C)
  std::vector<LayerTensors> layers;
  float *lnf_weight, *lnf_bias;        // (C), (C) or null
  float *lm_head_weight, *lm_head_bias;  // (V, C): the token embedding when tied; (V) or null
};

ModelTensors bind_tensors(const ParameterLayout& layout, const ModelShape& shape, float* base);

}  // namespace folio
