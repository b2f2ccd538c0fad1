// folio's parameters under the names of the seed's PyTorch state_dict, and back. The only tensor
// that differs is each block's fused qkv matrix, which the seed holds as per-head modules:
//   blocks.{i}.sa.heads.{h}.query.weight  = rows [h*hs, (h+1)*hs)         of sa.qkv.weight
//   blocks.{i}.sa.heads.{h}.key.weight    = rows [A + h*hs, A + (h+1)*hs)
//   blocks.{i}.sa.heads.{h}.value.weight  = rows [2A + h*hs, 2A + (h+1)*hs)
// (and the same of sa.qkv.bias with qkv_bias, as ....bias).
// With torch_names = seed004 the names are those of seed 004's AttentionModel: token_emb,
// position_emb, blocks.{i}.layernorm1/layernorm2/multihead/feedforward, the final LayerNorm as
// blocks.{n_layer}, out; and its heads' k, q, v, where its k holds folio's queries and its q
// folio's keys (its scores are k @ q^T: the same product with the two renamed).
// With tied weights lm_head.weight is written too (a copy of the token embedding), so that
// PyTorch's strict load_state_dict finds every key it expects. Vocabulary padding is not written
// (tensors have vocab_size rows, as in an unpadded model); reading leaves the padded rows zero.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/parameter_source.h"
#include "io/safetensors.h"
#include "model/model_shape.h"
#include "model/parameter_layout.h"

namespace folio {

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// The name that a tensor or module named as in seed 000 (folio's own names, as
// "blocks.0.ffwd.net.3") has in the shape's PyTorch model (torch_names).
std::string torch_name(const ModelShape& shape, const std::string& seed000_name);
// The per-head module tensor holding head `head`'s rows `which` (0 queries, 1 keys, 2 values) of
// block `layer`'s fused qkv `kind` ("weight" or "bias").
std::string torch_head_name(const ModelShape& shape, int layer, int head, int which,
                            const std::string& kind);

// The tensors as they are written (save_checkpoint): views of `flat`, which must outlive them.
std::vector<TensorToWrite> seed_state_dict_views(const ModelShape& shape,
                                                 const ParameterLayout& layout,
                                                 const std::vector<float>& flat);
// The same with each tensor's values copied (for tests that compare or edit them).
std::vector<NamedTensor> to_seed_state_dict(const ModelShape& shape,
                                            const ParameterLayout& layout,
                                            const std::vector<float>& flat);

// The flat parameters from a file whose tensors carry the seed's names, as a source that reads
// them when written into a model. Every tensor the shape needs must be there with the right shape
// and a floating point dtype; the seed's `tril` mask buffers are ignored; any other tensor is an
// error (it means the file's structure differs from the config). All of that is checked here,
// from the header; the values (finite, a tied head equal to the embedding) as they are written.
FileParameters from_seed_state_dict(const ModelShape& shape, const ParameterLayout& layout,
                                    const SafetensorsFile& file);

}  // namespace folio
