// The one Config struct: every setting of a run, with its defaults (seed 000's recipe, the
// shakespeare_char preset). Presets and config files are lists of `key = value` lines applied on
// top of these defaults, then `--key=value` flags on top of those.
//
// Every key is described once, in config_keys.cpp (type, range, help); parsing, validation,
// `--help`, printing and the JSON stored in checkpoints all read that table.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace folio {

struct Config {
  // ---- model -------------------------------------------------------------------------------
  int n_layer = 6;
  int n_head = 6;
  int n_embd = 384;
  int head_size = 0;  // 0: n_embd / n_head (must divide); seed 004 uses 32 // 3 = 10
  int block_size = 256;
  double dropout = 0.2;
  double embedding_dropout = 0.0;  // on tok_emb + pos_emb (nanoGPT, GPT-2); the seeds have none
  bool bias = true;
  bool qkv_bias = false;                 // biases on the attention's key/query/value (seed 004)
  std::string block_order = "pre_norm";  // pre_norm (seed 000) or post_norm (seed 004)
  bool lm_head_bias = true;  // with bias: lm_head has one too (the seed); GPT-2's has none
  std::string activation = "relu";
  bool tie_weights = false;
  std::string init = "normal";  // normal (N(0, init_std)) or torch_default (seed 004)
  double init_std = 0.02;
  bool scaled_residual_init = false;
  std::string torch_names = "seed000";  // the PyTorch module names of checkpoints
  int vocab_padding = 1;  // vocabulary rows rounded up to a multiple of this (llm.c: 128)

  // ---- data --------------------------------------------------------------------------------
  std::string data;  // empty: data/tinyshakespeare/input.txt, fetched when absent
  std::string tokenizer;  // of --data: gpt2|FILE|DIR; empty: DIR/tokenizer.json, else a text's chars
  double train_fraction = 0.9;

  // ---- optimisation ------------------------------------------------------------------------
  std::string sampling = "random";  // random windows (the seed) or epochs (DistributedSampler)
  int batch_size = 64;
  int grad_accum = 1;
  int max_iters = 5000;
  double learning_rate = 3e-4;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double adam_eps = 1e-8;
  double weight_decay = 0.01;
  std::string decay_params = "all";
  std::string lr_schedule = "constant";
  int warmup_iters = 0;
  int lr_decay_iters = 5000;
  double min_lr = 3e-5;
  double grad_clip = 0.0;

  // ---- evaluation, logging, checkpoints ----------------------------------------------------
  int eval_interval = 100;
  int eval_iters = 200;
  int log_interval = 10;
  int sample_tokens = 500;
  int checkpoint_interval = 500;  // training state for --resume; also written at exit
  std::string out_dir = "out";

  // ---- execution ---------------------------------------------------------------------------
  uint64_t seed = 1337;
  std::string device = "auto";
  std::string dtype = "auto";  // matrix products: auto is bf16 on a GPU, fp32 on the CPU
  bool tf32 = false;           // fp32 matrix products on TF32 tensor cores (GPU)
  bool cuda_graph = true;      // a GPU replays the recorded training step (one process)
  int threads = 0;  // 0: every core this process may use
  std::string batch_split = "auto";  // CPU: each thread a share of a small model's batch
  double dist_timeout = 300;  // seconds a rank waits for the others before giving up
  bool overlap_gradient_sums = true;  // each block's gradients summed over ranks in the backward

  // Derived values.
  int effective_head_size() const { return head_size > 0 ? head_size : n_embd / n_head; }
  int attention_width() const { return n_head * effective_head_size(); }
};

using ConfigMember = std::variant<int Config::*, uint64_t Config::*, double Config::*,
                                  bool Config::*, std::string Config::*>;

// Who decides a key, which says when it may change (config_keys.cpp gives each key one):
//   model   the network's structure: fixed by a checkpoint (--init_from, --resume)
//   recipe  what a step computes (optimizer, data split, seed, precision...): fixed on --resume
//   run     how far and how loudly a run goes (max_iters, logging, samples, state saves): may
//           change on --resume
//   host    where this process runs and keeps its files (device, threads, data path, out_dir):
//           may change on --resume and may differ between ranks
enum class ConfigScope { kModel, kRecipe, kRun, kHost };

// One row of the key table. The type and the default come from `member` (the field of Config
// and its initialiser), so they are written once.
struct ConfigKey {
  const char* name;
  const char* group;  // the section of --help: "model", "data", "optimizer", "eval", "run"
  ConfigScope scope;
  ConfigMember member;
  const char* help;
  // Accepted values: numbers in [min, max] (min_exclusive makes it (min, max], max_exclusive
  // [min, max)), or one of `choices` (a '|'-separated list) for strings. Strings with no choices
  // take any text.
  double min = 0, max = 0;
  bool max_exclusive = false;
  bool min_exclusive = false;
  const char* choices = nullptr;
};

// The rules that follow from a key's scope.
inline bool may_change_on_resume(const ConfigKey& key) {
  return key.scope == ConfigScope::kRun || key.scope == ConfigScope::kHost;
}
inline bool ranks_must_agree(const ConfigKey& key) { return key.scope != ConfigScope::kHost; }
// The keys a resume keeps (model and recipe) whose values differ between `a` and `b`, in table
// order: none when `b` continues the run of `a` (a resume's overrides, a checkpoint of the run).
std::vector<const ConfigKey*> kept_keys_that_differ(const Config& a, const Config& b);
const char* scope_name(ConfigScope scope);  // "model", "recipe", "run", "host"

const std::vector<ConfigKey>& config_keys();
// "int", "float", "bool", "string" or "a|b|c" for a choice.
std::string config_key_type(const ConfigKey& key);
const ConfigKey* find_config_key(const std::string& name);

// Sets one key from text, checking its type and range; throws folio::Error naming the key.
void set_config_value(Config& config, const std::string& key, const std::string& value);
std::string get_config_value(const Config& config, const ConfigKey& key);

// Applies `key = value` lines ('#' starts a comment); `origin` names the file in errors. Returns
// the keys the text sets, in order.
std::vector<std::string> apply_config_text(Config& config, const std::string& text,
                                           const std::string& origin);

// Checks relations between keys (head size, schedule lengths...); throws folio::Error.
void validate_config(const Config& config);

// warmup_iters, lr_decay_iters and min_lr shape the cosine schedule alone. Refuses them among
// `given` (the keys the user set: on the command line or in a config file) when the schedule is
// constant, which would ignore them; throws folio::Error. Not part of validate_config: a
// preset's values of them (baby's, switched to constant), or a checkpoint's, are no one's mistake.
void refuse_unused_schedule_keys(const Config& config, const std::vector<std::string>& given);

// The config as JSON (values in their natural types) and back; from_json rejects unknown keys.
nlohmann::json config_to_json(const Config& config);
void apply_config_json(Config& config, const nlohmann::json& json, const std::string& origin);

// Human-readable `key = value` lines, grouped, for the start of a run.
std::string config_to_text(const Config& config);

// The closest known key to a misspelled one, or "" when nothing is close.
std::string nearest_config_key(const std::string& name);
// The candidate closest to `word` by edit distance, or "" when nothing is close.
std::string nearest_word(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace folio
