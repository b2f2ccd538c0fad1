#include "io/hf_gpt2.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "config/presets.h"
#include "core/error.h"
#include "core/printable.h"
#include "io/checkpoint_metadata.h"
#include "io/safetensors.h"
#include "io/whole_file.h"

namespace folio {

namespace {

namespace fs = std::filesystem;

// config.json's key for a character model's vocabulary, which no Hugging Face tokenizer file
// holds: its characters in id order, as one UTF-8 string (a checkpoint's `vocab`). transformers
// keeps an unknown key of config.json as an attribute, so the folder loads there as before.
constexpr const char* kCharactersKey = "folio_characters";

// FOLDER/config.json, parsed.
nlohmann::json read_hf_config(const fs::path& folder) {
  const std::string config_path = (folder / "config.json").string();
  try {
    return nlohmann::json::parse(read_whole_file(config_path, "the folder needs config.json"));
  } catch (const nlohmann::json::parse_error& error) {
    throw Error(config_path + " is not valid JSON (" + error.what() + ")");
  }
}

// The tokenizer that travels with a Hugging Face folder: AutoTokenizer's files (tokenizer.json,
// or vocab.json + merges.txt), or the characters of a character model folio exported (config.json
// `hf`, kCharactersKey). None: the caller says what is missing.
std::optional<Tokenizer> folder_tokenizer(const fs::path& folder, const nlohmann::json& hf) {
  if (fs::exists(folder / "tokenizer.json") ||
      (fs::exists(folder / "vocab.json") && fs::exists(folder / "merges.txt")))
    return Tokenizer::load(folder.string());
  if (!hf.is_object() || !hf.contains(kCharactersKey)) return std::nullopt;
  const std::string origin = (folder / "config.json").string() + "'s " + kCharactersKey;
  if (!hf[kCharactersKey].is_string())
    throw Error(origin + " is not a string: it lists a character model's vocabulary in id order");
  try {
    return Tokenizer(Vocabulary::from_utf8_symbols(hf[kCharactersKey].get<std::string>()));
  } catch (const Error& error) {
    throw Error(origin + ": " + error.what());
  }
}

// One parameter tensor of folio and where it lives in an HF file.
struct HfTensor {
  std::string hf_name;  // without the "transformer." prefix for the transformer's tensors
  std::string folio_name;
  bool conv1d_transposed;  // HF stores it (in, out), folio (out, in)
};

std::vector<HfTensor> tensor_map(const ModelShape& shape) {
  std::vector<HfTensor> map = {{"wte.weight", "token_embedding_table.weight", false},
                               {"wpe.weight", "position_embedding_table.weight", false}};
  for (int l = 0; l < shape.n_layer; ++l) {
    const std::string hf = "h." + std::to_string(l) + ".",
                      folio = "blocks." + std::to_string(l) + ".";
    for (const HfTensor& t :
         std::vector<HfTensor>{{"ln_1.weight", "ln1.weight", false},
                               {"ln_1.bias", "ln1.bias", false},
                               {"attn.c_attn.weight", "sa.qkv.weight", true},
                               {"attn.c_attn.bias", "sa.qkv.bias", false},  // with qkv_bias
                               {"attn.c_proj.weight", "sa.proj.weight", true},
                               {"attn.c_proj.bias", "sa.proj.bias", false},
                               {"ln_2.weight", "ln2.weight", false},
                               {"ln_2.bias", "ln2.bias", false},
                               {"mlp.c_fc.weight", "ffwd.net.0.weight", true},
                               {"mlp.c_fc.bias", "ffwd.net.0.bias", false},
                               {"mlp.c_proj.weight", "ffwd.net.2.weight", true},
                               {"mlp.c_proj.bias", "ffwd.net.2.bias", false}})
      map.push_back({hf + t.hf_name, folio + t.folio_name, t.conv1d_transposed});
  }
  map.push_back({"ln_f.weight", "ln_f.weight", false});
  map.push_back({"ln_f.bias", "ln_f.bias", false});
  return map;
}

// The shape HF gives each tensor, from folio's. The token embedding has vocab_size rows in HF's
// file; in folio's memory it may have more (vocabulary padding, zero rows after the real ones), so
// its shape is taken from the model's vocab_size and its values are the first rows.
std::vector<int64_t> hf_shape(const HfTensor& t, const ParameterTensor& tensor,
                              const ModelShape& model) {
  std::vector<int64_t> shape(tensor.shape.begin(), tensor.shape.end());
  if (t.folio_name == "token_embedding_table.weight") shape[0] = model.vocab_size;
  if (t.conv1d_transposed) std::swap(shape[0], shape[1]);
  return shape;
}

// The bias each HF tensor name implies (C, 3C or 4C values), for tensors folio lacks.
int64_t hf_bias_size(const std::string& hf_name, const ModelShape& shape) {
  const int64_t C = shape.n_embd;
  if (hf_name.find("c_attn") != std::string::npos) return 3 * C;
  if (hf_name.find("c_fc") != std::string::npos) return shape.hidden_width();
  return C;
}

// Elements [first, first + count) of the transpose of the (rows, cols) matrix at `matrix`, in
// row-major order: a Conv1D weight from folio's matrix (or back), a chunk at a time as it is
// written, so that no transposed copy of the whole matrix is made.
void transposed_range(const float* matrix, size_t rows, size_t cols, size_t first, size_t count,
                      float* out) {
  size_t c = first / rows, r = first % rows;  // out[i] is matrix[r][c]
  for (size_t i = 0; i < count; ++i) {
    out[i] = matrix[r * cols + c];
    if (++r == rows) r = 0, ++c;
  }
}

bool all_zero(const float* values, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (values[i] != 0.0f) return false;
  return true;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// GPT2Config's value of `key`, or its default when config.json leaves it out.
template <typename Value>
Value hf_value(const nlohmann::json& hf, const char* key, Value fallback,
               const std::string& origin) {
  const auto it = hf.find(key);
  if (it == hf.end() || it->is_null()) return fallback;
  const auto wrong = [&](const std::string& what) {
    return Error(origin + ": key " + key + " " + what + " (" + printable(it->dump()) + ")");
  };
  // nlohmann's get<int> of 1e300 or of a number past int's range is a cast C++ leaves undefined:
  // a whole number must be one, in range.
  if constexpr (std::is_same_v<Value, int>) {
    if (!it->is_number_integer()) throw wrong("is not a whole number");
    const bool fits = it->is_number_unsigned()
                          ? it->get<uint64_t>() <= uint64_t(std::numeric_limits<int>::max())
                          : it->get<int64_t>() >= std::numeric_limits<int>::min() &&
                                it->get<int64_t>() <= std::numeric_limits<int>::max();
    if (!fits) throw wrong("is out of range");
  }
  try {
    return it->get<Value>();
  } catch (const nlohmann::json::exception&) {
    throw wrong("has the wrong type");
  }
}

// GPT-2's activation_function names (transformers' ACT2FN) and folio's.
std::string folio_activation(const std::string& hf, const std::string& origin) {
  if (hf == "gelu_new" || hf == "gelu_pytorch_tanh") return "gelu_tanh";  // GELU, tanh form
  if (hf == "gelu") return "gelu";                                        // GELU, exact erf
  if (hf == "relu") return "relu";
  throw Error(origin + ": activation_function '" + printable(hf) +
              "' is not one folio computes: folio has relu, gelu (erf) and gelu_new (tanh)");
}

std::string hf_activation(const std::string& folio) {
  return folio == "gelu_tanh" ? "gelu_new" : folio;  // "gelu" and "relu" are HF's names too
}

}  // namespace

Config config_from_hf_json(const nlohmann::json& hf, const std::string& origin, Config base) {
  if (!hf.is_object()) throw Error(origin + " is not a JSON object: is it GPT-2's config.json?");
  const std::string model_type = hf_value<std::string>(hf, "model_type", "gpt2", origin);
  if (model_type != "gpt2")
    throw Error(origin + ": model_type is '" + printable(model_type) +
                "', but folio imports GPT-2 (GPT2LMHeadModel, model_type gpt2) only");
  // Options of GPT2Config that change what the model computes, each refused when set.
  auto refuse_if = [&](bool set, const std::string& key, const std::string& why) {
    if (set) throw Error(origin + ": " + key + " " + why + ", which folio's GPT does not compute");
  };
  refuse_if(!hf_value<bool>(hf, "scale_attn_weights", true, origin), "scale_attn_weights",
            "is false (no 1/sqrt(head_size) in attention)");
  refuse_if(hf_value<bool>(hf, "scale_attn_by_inverse_layer_idx", false, origin),
            "scale_attn_by_inverse_layer_idx", "is true (attention scaled by 1/(layer+1))");
  refuse_if(hf_value<bool>(hf, "reorder_and_upcast_attn", false, origin), "reorder_and_upcast_attn",
            "is true (attention reordered and upcast)");
  refuse_if(hf_value<bool>(hf, "add_cross_attention", false, origin), "add_cross_attention",
            "is true (cross-attention)");
  const int n_embd = hf_value<int>(hf, "n_embd", 768, origin);
  // null or absent: 4 * n_embd, GPT2Config's default (in 64 bits: n_embd is not checked yet)
  if (hf.contains("n_inner") && !hf["n_inner"].is_null()) {
    const int n_inner = hf_value<int>(hf, "n_inner", 0, origin);
    refuse_if(int64_t(n_inner) != 4 * int64_t(n_embd), "n_inner",
              "is " + std::to_string(n_inner) + ", not 4 * n_embd");
  }
  const double eps = hf_value<double>(hf, "layer_norm_epsilon", 1e-5, origin);
  refuse_if(std::abs(eps - 1e-5) > 1e-12, "layer_norm_epsilon",
            "is " + nlohmann::json(eps).dump() + ", not 1e-5");

  auto set = [&](const char* key, const std::string& value) {
    try {
      set_config_value(base, key, value);
    } catch (const Error& error) {
      throw Error(origin + " gives a model folio cannot hold: " + error.what());
    }
  };
  set("n_layer", std::to_string(hf_value<int>(hf, "n_layer", 12, origin)));
  set("n_head", std::to_string(hf_value<int>(hf, "n_head", 12, origin)));
  set("n_embd", std::to_string(n_embd));
  set("head_size", "0");
  set("block_size", std::to_string(hf_value<int>(hf, "n_positions", 1024, origin)));
  set("bias", "true");
  set("qkv_bias", "true");                                            // c_attn.bias
  if (find_config_key("lm_head_bias")) set("lm_head_bias", "false");  // COUPLING: gpt2-model's key
  set("block_order", "pre_norm");
  set("init", "normal");
  set("torch_names", "seed000");
  set("activation",
      folio_activation(hf_value<std::string>(hf, "activation_function", "gelu_new", origin),
                       origin));
  set("tie_weights", hf_value<bool>(hf, "tie_word_embeddings", true, origin) ? "true" : "false");
  // folio drops out attention weights and both residual branches at one rate (HF's attn_pdrop
  // and resid_pdrop), and the embeddings at their own (embd_pdrop).
  set("dropout", nlohmann::json(hf_value<double>(hf, "resid_pdrop", 0.1, origin)).dump());
  set("embedding_dropout",
      nlohmann::json(hf_value<double>(hf, "embd_pdrop", 0.1, origin)).dump());
  set("init_std", nlohmann::json(hf_value<double>(hf, "initializer_range", 0.02, origin)).dump());
  set("scaled_residual_init", "true");  // GPT-2's c_proj init
  if (base.n_embd % base.n_head != 0)
    throw Error(origin + ": n_embd " + std::to_string(base.n_embd) +
                " is not a multiple of n_head " + std::to_string(base.n_head));
  return base;
}

nlohmann::ordered_json hf_config_json(const Config& config, const ModelShape& shape,
                                      int eos_token_id) {
  // A model without an end-of-text token (a character vocabulary) has none to name: 50256 there
  // was a row its embedding does not have, for generate() to stop at.
  const nlohmann::ordered_json eos =
      eos_token_id >= 0 ? nlohmann::ordered_json(eos_token_id) : nlohmann::ordered_json(nullptr);
  nlohmann::ordered_json hf = {{"architectures", {"GPT2LMHeadModel"}},
                               {"model_type", "gpt2"},
                               {"vocab_size", shape.vocab_size},
                               {"n_positions", shape.block_size},
                               {"n_ctx", shape.block_size},
                               {"n_embd", shape.n_embd},
                               {"n_layer", shape.n_layer},
                               {"n_head", shape.n_head},
                               {"n_inner", nullptr},
                               {"activation_function", hf_activation(config.activation)},
                               {"resid_pdrop", config.dropout},
                               {"attn_pdrop", config.dropout},
                               {"embd_pdrop", config.embedding_dropout},
                               {"layer_norm_epsilon", 1e-5},
                               {"initializer_range", config.init_std},
                               {"scale_attn_weights", true},
                               {"scale_attn_by_inverse_layer_idx", false},
                               {"reorder_and_upcast_attn", false},
                               {"tie_word_embeddings", shape.tie_weights},
                               {"bos_token_id", eos},
                               {"eos_token_id", eos},
                               {"use_cache", true},
                               {"torch_dtype", "float32"}};
  return hf;
}

std::vector<float> from_hf_state_dict(const ModelShape& shape, const ParameterLayout& layout,
                                      const SafetensorsFile& file) {
  // Files saved from GPT2LMHeadModel prefix the transformer's tensors; from GPT2Model they do not.
  const std::string prefix = file.find("transformer.wte.weight") ? "transformer." : "";
  std::set<std::string> used;
  auto find = [&](const std::string& name,
                  const std::vector<int64_t>& expected) -> const SafetensorsTensor& {
    const SafetensorsTensor* tensor = file.find(name);
    if (tensor == nullptr)
      throw Error(file.path() + " lacks tensor " + name +
                  ", which GPT-2 of this config.json has: is the file complete?");
    if (tensor->shape != expected)
      throw Error(file.path() + ": tensor " + name + " has shape " + shape_text(tensor->shape) +
                  ", but config.json implies " + shape_text(expected));
    file.require_float(*tensor);
    used.insert(name);
    return *tensor;
  };

  // Each tensor read straight into its place (a Conv1D weight through one matrix's copy, to be
  // transposed): the import holds the model's values once, not a second copy.
  std::vector<float> flat(layout.total(), 0.0f);  // lm_head.bias stays zero: GPT-2 has none
  for (const HfTensor& t : tensor_map(shape)) {
    const std::string name = prefix + t.hf_name;
    const ParameterTensor* target = layout.find(t.folio_name);
    if (target == nullptr) throw Error("internal: no folio tensor " + t.folio_name);
    const std::vector<int64_t> expected = hf_shape(t, *target, shape);
    const SafetensorsTensor& tensor = find(name, expected);
    float* place = flat.data() + target->offset;
    if (!t.conv1d_transposed) {
      file.read_float32(tensor, 0, tensor.element_count(), place);
      continue;
    }
    const std::vector<float> conv1d = file.to_float32(tensor);
    transposed_range(conv1d.data(), expected[0], expected[1], 0, conv1d.size(), place);
  }
  const ParameterTensor& embedding = layout.at("token_embedding_table.weight");
  if (!shape.tie_weights) {
    const SafetensorsTensor& head = find("lm_head.weight", {shape.vocab_size, shape.n_embd});
    file.read_float32(head, 0, head.element_count(),
                      flat.data() + layout.at("lm_head.weight").offset);
  } else if (file.find("lm_head.weight") != nullptr) {
    // save_pretrained leaves the tied head out; torch.save-made files may hold the copy, which
    // is compared a chunk at a time.
    const SafetensorsTensor& head = find("lm_head.weight", {shape.vocab_size, shape.n_embd});
    constexpr size_t kChunk = SafetensorsFile::kChunkBytes / sizeof(float);
    std::vector<float> chunk;
    for (size_t first = 0; first < head.element_count(); first += kChunk) {
      chunk.resize(std::min(kChunk, head.element_count() - first));
      file.read_float32(head, first, chunk.size(), chunk.data());
      if (!std::equal(chunk.begin(), chunk.end(), flat.begin() + embedding.offset + first))
        throw Error(file.path() + ": lm_head.weight differs from " + prefix +
                    "wte.weight, but config.json ties them (tie_word_embeddings): set "
                    "\"tie_word_embeddings\": false in config.json if the head is its own");
    }
  }
  for (const SafetensorsTensor& tensor : file.tensors()) {
    const std::string& name = tensor.name;
    // Older files hold the causal mask buffers attn.bias and attn.masked_bias: not parameters.
    const bool is_mask = name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
    if (!is_mask && used.count(name) == 0)
      throw Error(file.path() + " has tensor " + name +
                  ", which GPT-2 of this config.json does not have: is config.json the one "
                  "saved with these weights?");
  }
  return flat;
}

std::vector<TensorToWrite> hf_state_dict_views(const ModelShape& shape,
                                               const ParameterLayout& layout,
                                               const std::vector<float>& flat) {
  if (shape.head_size * shape.n_head != shape.n_embd)
    throw Error("the model's heads are " + std::to_string(shape.n_head) + " x " +
                std::to_string(shape.head_size) + " wide, not n_embd (" +
                std::to_string(shape.n_embd) + "): GPT-2's attention cannot hold it");
  if (shape.block_order != BlockOrder::kPreNorm)
    throw Error(
        "the model's blocks are post_norm (block_order), but GPT-2's blocks normalise "
        "before each branch (pre_norm)");
  if (const ParameterTensor* head_bias = layout.find("lm_head.bias");
      head_bias && !all_zero(flat.data() + head_bias->offset, head_bias->size))
    throw Error(
        "the model has a non-zero lm_head.bias, which GPT-2's head does not have: only "
        "models whose head has no bias (or a zero one) can be exported");
  std::vector<TensorToWrite> out;
  for (const HfTensor& t : tensor_map(shape)) {
    const std::string name = "transformer." + t.hf_name;
    const ParameterTensor* source = layout.find(t.folio_name);
    if (source == nullptr) {  // a bias the model has not (bias or qkv_bias false): a zero one
      const int64_t size = t.hf_name.ends_with(".bias") ? hf_bias_size(t.hf_name, shape) : 0;
      if (size == 0) throw Error("internal: no folio tensor " + t.folio_name);
      out.push_back({name, {size}, [](size_t, size_t count, float* values) {
                       std::fill_n(values, count, 0.0f);
                     }});
      continue;
    }
    const float* values = flat.data() + source->offset;
    const std::vector<int64_t> written = hf_shape(t, *source, shape);
    if (!t.conv1d_transposed) {  // the token embedding's first vocab_size rows, or all of it
      out.push_back({name, written, values});
      continue;
    }
    const size_t rows = source->shape[0], cols = source->shape[1];
    out.push_back({name, written, [values, rows, cols](size_t first, size_t count, float* chunk) {
                     transposed_range(values, rows, cols, first, count, chunk);
                   }});
  }
  if (!shape.tie_weights)
    out.push_back({"lm_head.weight",
                   {shape.vocab_size, shape.n_embd},
                   flat.data() + layout.at("lm_head.weight").offset});
  return out;
}

HfGpt2Model read_hf_gpt2(const std::string& dir, const Config& base) {
  if (!fs::is_directory(dir))
    throw Error(dir +
                " is not a folder: pass the Hugging Face model folder (config.json and "
                "model.safetensors)");
  const fs::path folder(dir);
  const std::string config_path = (folder / "config.json").string();
  const std::string weights_path = (folder / "model.safetensors").string();
  if (!fs::exists(weights_path)) {
    if (fs::exists(folder / "model.safetensors.index.json"))
      throw Error(dir +
                  " holds a sharded checkpoint (model.safetensors.index.json): save it as "
                  "one file with save_pretrained(DIR, max_shard_size=\"100GB\")");
    if (fs::exists(folder / "pytorch_model.bin"))
      throw Error(dir +
                  " has pytorch_model.bin but no model.safetensors; folio reads safetensors "
                  "only: convert it with python3 -c \"import torch; from safetensors.torch "
                  "import save_file; s = torch.load('" +
                  dir +
                  "/pytorch_model.bin'); "
                  "save_file({k: v.clone().contiguous() for k, v in s.items()}, '" +
                  dir + "/model.safetensors', {'format': 'pt'})\"");
    throw Error(dir +
                " has no model.safetensors: pass a folder saved by transformers' "
                "save_pretrained");
  }
  const nlohmann::json hf = read_hf_config(folder);
  HfGpt2Model model;
  model.config = config_from_hf_json(hf, config_path, base);
  const int vocab_size = hf_value<int>(hf, "vocab_size", 50257, config_path);
  if (vocab_size < 1 || vocab_size > (1 << 24))
    throw Error(config_path + ": vocab_size " + std::to_string(vocab_size) + " is out of range");
  validate_config(model.config);
  model.shape = ModelShape::from_config(model.config, vocab_size);
  const ParameterLayout layout(model.shape);
  const SafetensorsFile file = SafetensorsFile::read(weights_path);
  model.parameters = from_hf_state_dict(model.shape, layout, file);
  for (float value : model.parameters)
    if (!std::isfinite(value)) throw Error(weights_path + " holds a non-finite value (NaN or Inf)");

  model.tokenizer = folder_tokenizer(folder, hf);  // the tokenizer travels with the model
  if (model.tokenizer) check_tokenizer_fits(*model.tokenizer, model.shape, dir + "'s tokenizer");
  return model;
}

namespace {

// A folder given to --init_from is a Hugging Face GPT-2 folder; a run's out_dir (which holds a
// checkpoint and no config.json) is told to give the checkpoint in it.
bool is_model_folder(const std::string& path) {
  if (!fs::is_directory(path)) return false;
  const fs::path folder(path);
  if (!fs::exists(folder / "config.json") && fs::exists(folder / "ckpt.safetensors"))
    throw UsageError("--init_from " + path + " is a run's folder: give the checkpoint in it, " +
                     (folder / "ckpt.safetensors").string());
  return true;
}

}  // namespace

LoadedCheckpoint load_initial_weights(const std::string& path, const Config& base,
                                      const Vocabulary* data_vocabulary) {
  if (!is_model_folder(path)) return load_checkpoint(path, base, data_vocabulary);
  HfGpt2Model model = read_hf_gpt2(path, base);
  if (!model.tokenizer)
    throw Error(path +
                " has no tokenizer (tokenizer.json, or vocab.json + merges.txt): copy the "
                "model's there, or `folio import` it with --tokenizer");
  LoadedCheckpoint checkpoint;
  checkpoint.path = path;
  checkpoint.config = model.config;
  checkpoint.tokenizer = *model.tokenizer;
  checkpoint.shape = model.shape;
  checkpoint.parameters = std::make_shared<HostParameters>(std::move(model.parameters));
  return checkpoint;
}

Config hf_gpt2_base_config() { return load_config("gpt2"); }

Config config_of_initial_weights(const std::string& path, const Config& base) {
  if (is_model_folder(path))
    return config_from_hf_json(read_hf_config(path), (fs::path(path) / "config.json").string(),
                               hf_gpt2_base_config());
  // The header alone (its checksum covers the config): the values are read later, once.
  const SafetensorsFile file = SafetensorsFile::read(path, DataCheck::kInOnePass);
  const CheckpointMetadata metadata(file, "checkpoint " + path);
  if (metadata.format() != kCheckpointFormat) return base;
  // Its model, recipe and run keys; where and on what the run that wrote it ran (its data,
  // out_dir, device, threads: the host keys) is not this run's business, and its out_dir would
  // have had this run replace the very checkpoint it starts from.
  const Config recorded = metadata.config();
  Config config = base;
  for (const ConfigKey& key : config_keys())
    if (key.scope != ConfigScope::kHost)
      set_config_value(config, key.name, get_config_value(recorded, key));
  return config;
}

std::optional<Tokenizer> tokenizer_of_initial_weights(const std::string& path) {
  // None in a folder: load_initial_weights says that it needs one.
  if (is_model_folder(path)) return folder_tokenizer(path, read_hf_config(path));
  const SafetensorsFile file = SafetensorsFile::read(path, DataCheck::kInOnePass);
  const CheckpointMetadata metadata(file, "checkpoint " + path);
  if (metadata.format() != kCheckpointFormat) return std::nullopt;
  return metadata.tokenizer();
}

void check_tokenizer_fits(const Tokenizer& tokenizer, const ModelShape& shape,
                          const std::string& what) {
  // COUPLING (gpt2-model's padded vocabulary): until then the embedding has exactly one row per
  // token id, as folio's checkpoints require.
  if (tokenizer.size() != shape.vocab_size)
    throw Error(what + " has " + std::to_string(tokenizer.size()) +
                " token ids, but the model's "
                "vocab_size is " +
                std::to_string(shape.vocab_size) + ": use the tokenizer saved with the model");
}

void write_hf_gpt2(const std::string& dir, const Config& config, const ModelShape& shape,
                   const std::vector<float>& flat, const Tokenizer& tokenizer) {
  const ParameterLayout layout(shape);
  const std::vector<TensorToWrite> tensors =
      hf_state_dict_views(shape, layout, flat);  // may refuse
  const int eos = tokenizer.end_of_text().value_or(-1);
  make_output_folder(dir, "--hf DIR");
  const fs::path folder(dir);
  // transformers checks "format": "pt" before loading a safetensors file into PyTorch.
  write_safetensors((folder / "model.safetensors").string(), tensors, {{"format", "pt"}});
  nlohmann::ordered_json hf = hf_config_json(config, shape, eos);
  if (const Vocabulary* characters = tokenizer.characters())
    hf[kCharactersKey] = characters->symbols_utf8();
  write_file_atomically((folder / "config.json").string(), hf.dump(2) + "\n");
  if (tokenizer.bpe() != nullptr)
    write_file_atomically((folder / "tokenizer.json").string(), tokenizer.tokenizer_json());
  else  // an earlier export's (or none): AutoTokenizer would load it for this model
    fs::remove(folder / "tokenizer.json");
}

}  // namespace folio
