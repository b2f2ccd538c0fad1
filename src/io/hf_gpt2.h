// Hugging Face GPT-2 checkpoints (transformers' GPT2LMHeadModel), read and written: a folder with
// config.json, model.safetensors and the tokenizer (tokenizer.json, or vocab.json + merges.txt).
//
// HF's blocks use Conv1D, which computes x @ W + b with W stored (in, out): the transpose of
// nn.Linear's (out, in), which is how folio stores every matrix. c_attn packs query, key and
// value as three column blocks of width C, head h at columns [h*hs, (h+1)*hs) of each: after the
// transpose that is exactly folio's fused qkv (queries, then keys, then values).
//
//   HF (prefix transformer.)         folio                             conversion
//   wte.weight         (V, C)        token_embedding_table.weight       as is
//   wpe.weight         (T, C)        position_embedding_table.weight    as is (block_size = T)
//   h.i.ln_1.weight/bias             blocks.i.ln1.weight/bias           as is
//   h.i.attn.c_attn.weight (C, 3C)   blocks.i.sa.qkv.weight (3C, C)     transposed
//   h.i.attn.c_attn.bias   (3C)      blocks.i.sa.qkv.bias (3C)          as is (qkv_bias)
//   h.i.attn.c_proj.weight (C, C)    blocks.i.sa.proj.weight            transposed
//   h.i.attn.c_proj.bias             blocks.i.sa.proj.bias              as is
//   h.i.ln_2.weight/bias             blocks.i.ln2.weight/bias           as is
//   h.i.mlp.c_fc.weight    (C, 4C)   blocks.i.ffwd.net.0.weight (4C, C) transposed
//   h.i.mlp.c_fc.bias                blocks.i.ffwd.net.0.bias           as is
//   h.i.mlp.c_proj.weight  (4C, C)   blocks.i.ffwd.net.2.weight (C, 4C) transposed
//   h.i.mlp.c_proj.bias              blocks.i.ffwd.net.2.bias           as is
//   ln_f.weight/bias                 ln_f.weight/bias                   as is
//   lm_head.weight (no prefix)       the token embedding (tied: usually absent from the file),
//                                    or lm_head.weight with tie_word_embeddings false
//   (GPT-2 has none)                 lm_head.bias: zero on import; must be zero to export
//
// Only what folio computes exactly is converted; anything else is refused naming the key or the
// tensor. An imported model has every GPT-2 bias (bias, qkv_bias); exporting a model without some
// of them writes zeros there, which is the same model.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "config/config.h"
#include "io/checkpoint.h"
#include "io/torch_names.h"
#include "model/model_shape.h"
#include "model/parameter_layout.h"
#include "tokenizer/tokenizer.h"

namespace folio {

class SafetensorsFile;

// A GPT2LMHeadModel folder as folio holds it.
struct HfGpt2Model {
  Config config;
  ModelShape shape;
  std::vector<float> parameters;       // flat, in the ParameterLayout of `shape`
  std::optional<Tokenizer> tokenizer;  // the folder's, when it has one
};

// What an imported model carries besides its structure: the gpt2 preset (nanoGPT's / llm.c's GPT-2
// recipe, vocab_padding 128). `folio import` and `folio train --init_from DIR` both start from it,
// so that a folder and its imported checkpoint train the same model.
Config hf_gpt2_base_config();

// config.json -> the model keys of `base` (the rest of `base`, the recipe, is kept). Keys absent
// from config.json take GPT2Config's defaults, as transformers does. `origin` names the file.
Config config_from_hf_json(const nlohmann::json& hf, const std::string& origin, Config base);
// The config.json of GPT2Config for `shape`; `eos_token_id` < 0 (no end-of-text token, as in a
// character vocabulary) writes null for it and for bos_token_id.
nlohmann::ordered_json hf_config_json(const Config& config, const ModelShape& shape,
                                      int eos_token_id);

// HF-named tensors (with or without the `transformer.` prefix) -> folio's flat parameters.
std::vector<float> from_hf_state_dict(const ModelShape& shape, const ParameterLayout& layout,
                                      const SafetensorsFile& file);
// folio's flat parameters -> HF names and Conv1D layout, as views of `flat` (which must outlive
// them) that write_safetensors reads, transposes or fills with zeros a chunk at a time; throws
// naming what GPT-2 cannot hold.
std::vector<TensorToWrite> hf_state_dict_views(const ModelShape& shape,
                                               const ParameterLayout& layout,
                                               const std::vector<float>& flat);

// Reads DIR (config.json, model.safetensors, the tokenizer when there is one).
HfGpt2Model read_hf_gpt2(const std::string& dir, const Config& base);
// What `folio train --init_from PATH` starts from: a Hugging Face GPT-2 folder (read as `folio
// import` reads it, the folder's tokenizer required) or a checkpoint file (load_checkpoint).
LoadedCheckpoint load_initial_weights(const std::string& path, const Config& base,
                                      const Vocabulary* data_vocabulary);
// The config such a run starts from when no --config is given: the folder's config.json on top of
// hf_gpt2_base_config(), or the checkpoint's stored model, recipe and run keys on top of `base`
// (whose host keys it keeps: data, out_dir, device...; `base` alone for a file without a config).
Config config_of_initial_weights(const std::string& path, const Config& base);
// The tokenizer that comes with them, which reads the run's text unless --tokenizer is given (as
// a resumed run's does): a folio checkpoint's (characters or BPE), a Hugging Face folder's files;
// none for a file PyTorch wrote, which carries no vocabulary (the text's characters are then it).
std::optional<Tokenizer> tokenizer_of_initial_weights(const std::string& path);

// Throws unless `tokenizer` has one id per row of the model's token embedding; `what` names it.
void check_tokenizer_fits(const Tokenizer& tokenizer, const ModelShape& shape,
                          const std::string& what);
// Writes DIR/config.json and DIR/model.safetensors (metadata "format": "pt"), and
// DIR/tokenizer.json when the tokenizer is a BPE. Creates DIR when absent.
void write_hf_gpt2(const std::string& dir, const Config& config, const ModelShape& shape,
                   const std::vector<float>& flat, const Tokenizer& tokenizer);

}  // namespace folio
