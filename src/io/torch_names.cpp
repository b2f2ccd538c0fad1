#include "io/torch_names.h"

#include <set>

#include "core/error.h"

namespace folio {

namespace {

const char* const kProjections[3] = {"query", "key", "value"};

std::string head_name(int layer, int head, int which) {
  return "blocks." + std::to_string(layer) + ".sa.heads." + std::to_string(head) + "." +
         kProjections[which] + ".weight";
}

bool is_qkv(const ParameterTensor& tensor, int& layer) {
  const std::string suffix = ".sa.qkv.weight";
  const std::string& name = tensor.name;
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(),
                                                   suffix) != 0)
    return false;
  layer = std::stoi(name.substr(7));  // "blocks.<layer>.sa.qkv.weight"
  return true;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

}  // namespace

std::vector<NamedTensor> to_seed_state_dict(const ModelShape& shape,
                                            const ParameterLayout& layout,
                                            const std::vector<float>& flat) {
  const int C = shape.n_embd, A = shape.attention_width(), hs = shape.head_size;
  std::vector<NamedTensor> out;
  for (const ParameterTensor& tensor : layout.tensors()) {
    const float* values = flat.data() + tensor.offset;
    int layer;
    if (is_qkv(tensor, layer)) {
      for (int which = 0; which < 3; ++which)
        for (int h = 0; h < shape.n_head; ++h) {
          const float* rows = values + (static_cast<size_t>(which) * A + h * hs) * C;
          out.push_back({head_name(layer, h, which), {hs, C},
                         std::vector<float>(rows, rows + static_cast<size_t>(hs) * C)});
        }
      continue;
    }
    const std::vector<int> saved = tensor.saved_shape();  // the padded rows left out
    out.push_back({tensor.name, std::vector<int64_t>(saved.begin(), saved.end()),
                   std::vector<float>(values, values + tensor.saved_size())});
    if (shape.tie_weights && tensor.name == "token_embedding_table.weight")
      out.push_back({"lm_head.weight", out.back().shape, out.back().values});
  }
  return out;
}

std::vector<float> from_seed_state_dict(const ModelShape& shape, const ParameterLayout& layout,
                                        const SafetensorsFile& file) {
  const int C = shape.n_embd, A = shape.attention_width(), hs = shape.head_size;
  std::set<std::string> used;
  auto read = [&](const std::string& name, const std::vector<int64_t>& expected) {
    const SafetensorsTensor* tensor = file.find(name);
    if (tensor == nullptr)
      throw Error("checkpoint " + file.path() + " lacks tensor " + name +
                  ", which the model needs: its structure differs from the config (n_layer, "
                  "n_head, bias, tie_weights?)");
    if (tensor->shape != expected)
      throw Error("checkpoint " + file.path() + ": tensor " + name + " has shape " +
                  shape_text(tensor->shape) + ", but the config needs " + shape_text(expected));
    used.insert(name);
    return file.to_float32(*tensor);
  };

  std::vector<float> flat(layout.total());
  for (const ParameterTensor& tensor : layout.tensors()) {
    float* values = flat.data() + tensor.offset;
    int layer;
    if (is_qkv(tensor, layer)) {
      for (int which = 0; which < 3; ++which)
        for (int h = 0; h < shape.n_head; ++h) {
          const std::vector<float> rows = read(head_name(layer, h, which), {hs, C});
          std::copy(rows.begin(), rows.end(),
                    values + (static_cast<size_t>(which) * A + h * hs) * C);
        }
      continue;
    }
    const std::vector<int> saved = tensor.saved_shape();  // padded rows stay zero
    const std::vector<float> data =
        read(tensor.name, std::vector<int64_t>(saved.begin(), saved.end()));
    std::copy(data.begin(), data.end(), values);
  }
  if (shape.tie_weights && file.find("lm_head.weight") != nullptr) {
    // A tied PyTorch model's state_dict holds the shared tensor under both names.
    const ParameterTensor& embedding = layout.at("token_embedding_table.weight");
    const std::vector<float> head =
        read("lm_head.weight", {shape.vocab_size, shape.n_embd});
    if (!std::equal(head.begin(), head.end(), flat.begin() + embedding.offset))
      throw Error("checkpoint " + file.path() +
                  ": lm_head.weight differs from token_embedding_table.weight, but the config "
                  "ties them; pass --tie_weights=false");
  }
  for (const SafetensorsTensor& tensor : file.tensors()) {
    const std::string& name = tensor.name;
    const bool is_mask = name.size() > 5 && name.compare(name.size() - 5, 5, ".tril") == 0;
    if (!is_mask && used.count(name) == 0)
      throw Error("checkpoint " + file.path() + " has tensor " + name +
                  ", which this model does not have: its structure differs from the config "
                  "(n_layer, bias, tie_weights?)");
  }
  return flat;
}

}  // namespace folio
