#include "io/torch_names.h"

#include <set>

#include "core/error.h"

namespace folio {

namespace {

// Per-head module names of the fused qkv rows: which = 0 (folio's queries), 1 (keys), 2 (values).
// Seed 004 scores k @ q^T, so its `k` plays folio's query and its `q` folio's key.
const char* const kSeed000Projections[3] = {"query", "key", "value"};
const char* const kSeed004Projections[3] = {"k", "q", "v"};

// Seed 004's names for the parts of seed 000's that differ, as (seed 000 prefix, seed 004 prefix).
struct Rename {
  const char* from;
  const char* to;
};
const Rename kSeed004Model[] = {{"token_embedding_table.", "token_emb."},
                                {"position_embedding_table.", "position_emb."},
                                {"lm_head.", "out."}};
const Rename kSeed004Block[] = {{"ln1.", "layernorm1."},
                                {"ln2.", "layernorm2."},
                                {"sa.", "multihead."},
                                {"ffwd.", "feedforward."}};

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

std::string torch_name(const ModelShape& shape, const std::string& name) {
  if (shape.torch_names == TorchNames::kSeed000) return name;
  // Seed 004 keeps its final LayerNorm as the last entry of its `blocks` list.
  if (starts_with(name, "ln_f.")) return "blocks." + std::to_string(shape.n_layer) + name.substr(4);
  for (const Rename& rename : kSeed004Model)
    if (starts_with(name, rename.from))
      return rename.to + name.substr(std::string(rename.from).size());
  if (starts_with(name, "blocks.")) {
    const size_t dot = name.find('.', 7);  // "blocks.<layer>.<rest>"
    const std::string rest = name.substr(dot + 1);
    for (const Rename& rename : kSeed004Block)
      if (starts_with(rest, rename.from))
        return name.substr(0, dot + 1) + rename.to + rest.substr(std::string(rename.from).size());
  }
  return name;
}

std::string torch_head_name(const ModelShape& shape, int layer, int head, int which,
                            const std::string& kind) {
  const bool seed004 = shape.torch_names == TorchNames::kSeed004;
  return torch_name(shape, "blocks." + std::to_string(layer) + ".sa.") + "heads." +
         std::to_string(head) + "." + (seed004 ? kSeed004Projections : kSeed000Projections)[which] +
         "." + kind;
}

namespace {

// For blocks.<layer>.sa.qkv.weight and .bias: the layer and "weight" or "bias".
bool is_qkv(const ParameterTensor& tensor, int& layer, std::string& kind) {
  const std::string& name = tensor.name;
  for (const char* candidate : {"weight", "bias"}) {
    const std::string suffix = std::string(".sa.qkv.") + candidate;
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      layer = std::stoi(name.substr(7));  // "blocks.<layer>.sa.qkv.<kind>"
      kind = candidate;
      return true;
    }
  }
  return false;
}

// One head's rows of a fused qkv tensor: (hs, C) of the weight, (hs) of the bias.
std::vector<int64_t> head_shape(const ParameterTensor& tensor, int hs) {
  if (tensor.is_matrix()) return {hs, tensor.shape[1]};
  return {hs};
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

}  // namespace

std::vector<TensorToWrite> seed_state_dict_views(const ModelShape& shape,
                                                 const ParameterLayout& layout,
                                                 const std::vector<float>& flat) {
  const int A = shape.attention_width(), hs = shape.head_size;
  std::vector<TensorToWrite> out;
  for (const ParameterTensor& tensor : layout.tensors()) {
    const float* values = flat.data() + tensor.offset;
    int layer;
    std::string kind;
    if (is_qkv(tensor, layer, kind)) {
      const size_t width = tensor.size / (3 * static_cast<size_t>(A));  // C, or 1 for the bias
      for (int which = 0; which < 3; ++which)
        for (int h = 0; h < shape.n_head; ++h)
          out.push_back({torch_head_name(shape, layer, h, which, kind), head_shape(tensor, hs),
                         values + (static_cast<size_t>(which) * A + h * hs) * width});
      continue;
    }
    const std::vector<int> saved = tensor.saved_shape();  // the padded rows left out
    out.push_back(
        {torch_name(shape, tensor.name), std::vector<int64_t>(saved.begin(), saved.end()), values});
    if (shape.tie_weights && tensor.name == "token_embedding_table.weight")
      out.push_back({torch_name(shape, "lm_head.weight"), out.back().shape, values});
  }
  return out;
}

std::vector<NamedTensor> to_seed_state_dict(const ModelShape& shape, const ParameterLayout& layout,
                                            const std::vector<float>& flat) {
  std::vector<NamedTensor> out;
  for (const TensorToWrite& view : seed_state_dict_views(shape, layout, flat)) {
    size_t count = 1;
    for (int64_t d : view.shape) count *= static_cast<size_t>(d);
    out.push_back({view.name, view.shape, std::vector<float>(view.data, view.data + count)});
  }
  return out;
}

FileParameters from_seed_state_dict(const ModelShape& shape, const ParameterLayout& layout,
                                    const SafetensorsFile& file) {
  const int A = shape.attention_width(), hs = shape.head_size;
  std::set<std::string> used;
  auto find = [&](const std::string& name,
                  const std::vector<int64_t>& expected) -> const SafetensorsTensor& {
    const SafetensorsTensor* tensor = file.find(name);
    if (tensor == nullptr)
      throw Error("checkpoint " + file.path() + " lacks tensor " + name +
                  ", which the model needs: its structure differs from the config (n_layer, "
                  "n_head, bias, qkv_bias, tie_weights, torch_names?)");
    if (tensor->shape != expected)
      throw Error("checkpoint " + file.path() + ": tensor " + name + " has shape " +
                  shape_text(tensor->shape) + ", but the config needs " + shape_text(expected));
    file.require_float(*tensor);
    used.insert(name);
    return *tensor;
  };

  std::vector<FileParameters::Placement> placements;
  for (const ParameterTensor& tensor : layout.tensors()) {
    int layer;
    std::string kind;
    if (is_qkv(tensor, layer, kind)) {
      const size_t width = tensor.size / (3 * static_cast<size_t>(A));  // C, or 1 for the bias
      for (int which = 0; which < 3; ++which)
        for (int h = 0; h < shape.n_head; ++h)
          placements.push_back(
              {find(torch_head_name(shape, layer, h, which, kind), head_shape(tensor, hs)),
               tensor.offset + (static_cast<size_t>(which) * A + h * hs) * width});
      continue;
    }
    const std::vector<int> saved = tensor.saved_shape();  // padded rows stay zero
    placements.push_back(
        {find(torch_name(shape, tensor.name), std::vector<int64_t>(saved.begin(), saved.end())),
         tensor.offset});
  }
  std::vector<FileParameters::Duplicate> duplicates;
  const std::string lm_head = torch_name(shape, "lm_head.weight");
  if (shape.tie_weights && file.find(lm_head) != nullptr) {
    // A tied PyTorch model's state_dict holds the shared tensor under both names.
    const std::string embedding = torch_name(shape, "token_embedding_table.weight");
    duplicates.push_back({find(lm_head, {shape.vocab_size, shape.n_embd}), *file.find(embedding),
                          "checkpoint " + file.path() + ": " + lm_head + " differs from " +
                              embedding + ", but the config ties them; pass --tie_weights=false"});
  }
  for (const SafetensorsTensor& tensor : file.tensors()) {
    const std::string& name = tensor.name;
    const bool is_mask = name.size() > 5 && name.compare(name.size() - 5, 5, ".tril") == 0;
    if (!is_mask && used.count(name) == 0)
      throw Error("checkpoint " + file.path() + " has tensor " + name +
                  ", which this model does not have: its structure differs from the config "
                  "(n_layer, bias, qkv_bias, tie_weights, torch_names?)");
  }
  return FileParameters(file, layout.total(), std::move(placements), std::move(duplicates));
}

}  // namespace folio
