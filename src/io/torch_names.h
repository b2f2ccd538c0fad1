// folio's parameters under the names of the seed's PyTorch state_dict, and back. The only tensor
// that differs is each block's fused qkv matrix, which the seed holds as per-head modules:
//   blocks.{i}.sa.heads.{h}.query.weight  = rows [h*hs, (h+1)*hs)         of sa.qkv.weight
//   blocks.{i}.sa.heads.{h}.key.weight    = rows [A + h*hs, A + (h+1)*hs)
//   blocks.{i}.sa.heads.{h}.value.weight  = rows [2A + h*hs, 2A + (h+1)*hs)
// With tied weights lm_head.weight is written too (a copy of the token embedding), so that
// PyTorch's strict load_state_dict finds every key it expects. Vocabulary padding is not written
// (tensors have vocab_size rows, as in an unpadded model); reading leaves the padded rows zero.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/model_shape.h"
#include "model/parameter_layout.h"

namespace folio {

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

std::vector<NamedTensor> to_seed_state_dict(const ModelShape& shape,
                                            const ParameterLayout& layout,
                                            const std::vector<float>& flat);

// The flat parameters from a file whose tensors carry the seed's names. Every tensor the shape
// needs must be there with the right shape; the seed's `tril` mask buffers are ignored; any other
// tensor is an error (it means the file's structure differs from the config).
std::vector<float> from_seed_state_dict(const ModelShape& shape, const ParameterLayout& layout,
                                        const SafetensorsFile& file);

}  // namespace folio
