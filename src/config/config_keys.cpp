// The key table: the single place that says what each config key is. Adding a field to Config
// without a row here fails the test that --help lists every key.
#include <limits>

#include "config/config.h"

namespace folio {

namespace {
constexpr double kIntMax = std::numeric_limits<int>::max();
}

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = {
      // model ------------------------------------------------------------------------------
      {"n_layer", "model", &Config::n_layer, "number of transformer blocks", 1, 4096, false,
       nullptr, true},
      {"n_head", "model", &Config::n_head, "attention heads per block", 1, 4096, false, nullptr,
       true},
      {"n_embd", "model", &Config::n_embd, "width of the residual stream (embedding size)", 1,
       1 << 20, false, nullptr, true},
      {"head_size", "model", &Config::head_size,
       "width of one attention head; 0 means n_embd / n_head (which must then divide)", 0,
       1 << 20, false, nullptr, true},
      {"block_size", "model", &Config::block_size,
       "context length: tokens a prediction can see", 1, 1 << 20, false, nullptr, true},
      {"dropout", "model", &Config::dropout,
       "dropout probability on attention weights and on both residual branches (training only)",
       0, 1, true, nullptr, false},
      {"bias", "model", &Config::bias,
       "biases in Linear and LayerNorm layers (seed: true; nanoGPT recipe: false)", 0, 0, false,
       nullptr, true},
      {"activation", "model", &Config::activation, "feed-forward nonlinearity", 0, 0, false,
       "relu|gelu", true},
      {"tie_weights", "model", &Config::tie_weights,
       "share lm_head.weight with token_embedding_table.weight", 0, 0, false, nullptr, true},
      {"init_std", "model", &Config::init_std,
       "standard deviation of the normal init of every Linear and Embedding weight", 0, 10,
       false, nullptr, false},
      {"scaled_residual_init", "model", &Config::scaled_residual_init,
       "init sa.proj and ffwd.net.2 weights with init_std / sqrt(2 n_layer) (GPT-2, nanoGPT)", 0,
       0, false, nullptr, false},
      // data -------------------------------------------------------------------------------
      {"data", "data", &Config::data,
       "UTF-8 text file to train on; empty: data/tinyshakespeare/input.txt, downloaded when "
       "absent",
       0, 0, false, nullptr, false},
      {"train_fraction", "data", &Config::train_fraction,
       "leading fraction of the text used for training; the rest is validation", 0, 1, true,
       nullptr, false},
      {"sampling", "data", &Config::sampling,
       "random: windows at random offsets, as the seed; epoch: every window once per epoch, "
       "shuffled per epoch and sharded over ranks, as DistributedSampler",
       0, 0, false, "random|epoch", false},
      // optimizer --------------------------------------------------------------------------
      {"batch_size", "optimizer", &Config::batch_size, "windows per micro-batch (per rank)", 1,
       kIntMax, false, nullptr, false},
      {"grad_accum", "optimizer", &Config::grad_accum,
       "micro-batches whose gradients are summed before each optimizer step", 1, kIntMax, false,
       nullptr, false},
      {"max_iters", "optimizer", &Config::max_iters, "optimizer steps to train", 0, kIntMax,
       false, nullptr, false},
      {"learning_rate", "optimizer", &Config::learning_rate, "peak learning rate of AdamW", 0, 10,
       false, nullptr, false},
      {"beta1", "optimizer", &Config::beta1, "AdamW first-moment decay", 0, 1, true, nullptr,
       false},
      {"beta2", "optimizer", &Config::beta2, "AdamW second-moment decay", 0, 1, true, nullptr,
       false},
      {"adam_eps", "optimizer", &Config::adam_eps, "AdamW epsilon added to sqrt(v)", 0, 1, false,
       nullptr, false},
      {"weight_decay", "optimizer", &Config::weight_decay,
       "AdamW decoupled weight decay coefficient", 0, 10, false, nullptr, false},
      {"decay_params", "optimizer", &Config::decay_params,
       "which parameters weight decay applies to: all (torch AdamW default) or matrices (2-D "
       "tensors, as nanoGPT)",
       0, 0, false, "all|matrices", false},
      {"lr_schedule", "optimizer", &Config::lr_schedule,
       "constant, or cosine: linear warm-up then cosine decay to min_lr at lr_decay_iters", 0, 0,
       false, "constant|cosine", false},
      {"warmup_iters", "optimizer", &Config::warmup_iters,
       "linear warm-up steps (cosine schedule)", 0, kIntMax, false, nullptr, false},
      {"lr_decay_iters", "optimizer", &Config::lr_decay_iters,
       "step at which the cosine schedule reaches min_lr", 1, kIntMax, false, nullptr, false},
      {"min_lr", "optimizer", &Config::min_lr, "learning rate at the end of the cosine decay", 0,
       10, false, nullptr, false},
      {"grad_clip", "optimizer", &Config::grad_clip,
       "clip the global gradient norm to this value; 0 turns clipping off", 0, 1e9, false,
       nullptr, false},
      // eval -------------------------------------------------------------------------------
      {"eval_interval", "eval", &Config::eval_interval,
       "evaluate (and maybe checkpoint) every this many steps, and at the last step", 1, kIntMax,
       false, nullptr, false},
      {"eval_iters", "eval", &Config::eval_iters, "random batches per split in each evaluation",
       1, kIntMax, false, nullptr, false},
      {"log_interval", "eval", &Config::log_interval,
       "print a progress line every this many steps; 0 turns it off", 0, kIntMax, false, nullptr,
       false},
      {"sample_tokens", "eval", &Config::sample_tokens,
       "characters sampled before and after training; 0 turns the samples off", 0, kIntMax,
       false, nullptr, false},
      {"checkpoint_interval", "eval", &Config::checkpoint_interval,
       "write the training state (for --resume) every this many steps, and at exit; 0: only at "
       "exit",
       0, kIntMax, false, nullptr, false},
      {"out_dir", "eval", &Config::out_dir,
       "folder for ckpt.safetensors and metrics.jsonl", 0, 0, false, nullptr, false},
      // run --------------------------------------------------------------------------------
      {"seed", "run", &Config::seed,
       "seed of every random stream (init, batches, dropout, sampling)", 0, 0, false, nullptr,
       false},
      {"device", "run", &Config::device, "where to compute: auto picks a GPU when there is one",
       0, 0, false, "auto|cpu|cuda", false},
      {"dtype", "run", &Config::dtype,
       "precision of the matrix products: auto is bf16 on a GPU and fp32 on the CPU; bf16 rounds "
       "their operands to bf16 and accumulates in fp32, with fp32 master weights, optimizer "
       "state and checkpoints (on a CPU without AVX512-BF16 or AMX it is slower than fp32)",
       0, 0, false, "auto|fp32|bf16", false},
      {"tf32", "run", &Config::tf32,
       "with dtype fp32 on a GPU, run the matrix products on TF32 tensor cores (faster, 10-bit "
       "mantissa products); ignored on the CPU",
       0, 0, false, nullptr, false},
      {"threads", "run", &Config::threads, "CPU threads; 0 means every core available", 0, 4096,
       false, nullptr, false},
      {"dist_timeout", "run", &Config::dist_timeout,
       "seconds a rank waits for the others in a collective before stopping with an error", 1,
       1e6, false, nullptr, false},
  };
  return keys;
}

const ConfigKey* find_config_key(const std::string& name) {
  for (const ConfigKey& key : config_keys())
    if (name == key.name) return &key;
  return nullptr;
}

std::string config_key_type(const ConfigKey& key) {
  if (key.choices != nullptr) return key.choices;
  switch (key.member.index()) {
    case 0:
    case 1: return "int";
    case 2: return "float";
    case 3: return "bool";
    default: return "string";
  }
}

}  // namespace folio
