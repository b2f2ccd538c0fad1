// The key table: the single place that says what each config key is (name, help section,
// scope, field, help, accepted values); the field gives its type and default. Parsing,
// validation, `folio train --help`, the README's key list (`folio train --help --markdown`),
// the JSON stored in checkpoints, the resume rule and the ranks' agreement check all read it.
// Adding a field to Config without a row here fails the test that --help lists every key.
#include <limits>

#include "config/config.h"

namespace folio {

namespace {
constexpr double kIntMax = std::numeric_limits<int>::max();
}

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = {
      // model ------------------------------------------------------------------------------
      {.name = "n_layer",
       .group = "model",
       .scope = ConfigScope::kModel,
       .member = &Config::n_layer,
       .help = "number of transformer blocks",
       .min = 1,
       .max = 4096},
      {.name = "n_head",
       .group = "model",
       .scope = ConfigScope::kModel,
       .member = &Config::n_head,
       .help = "attention heads per block",
       .min = 1,
       .max = 4096},
      {.name = "n_embd",
       .group = "model",
       .scope = ConfigScope::kModel,
       .member = &Config::n_embd,
       .help = "width of the residual stream (embedding size)",
       .min = 1,
       .max = 1 << 20},
      {.name = "head_size",
       .group = "model",
       .scope = ConfigScope::kModel,
       .member = &Config::head_size,
       .help = "width of one attention head; 0 means n_embd / n_head (which must then divide)",
       .max = 1 << 20},
      {.name = "block_size",
       .group = "model",
       .scope = ConfigScope::kModel,
       .member = &Config::block_size,
       .help = "context length: tokens a prediction can see",
       .min = 1,
       .max = 1 << 20},
      {.name = "dropout",
       .group = "model",
       .scope = ConfigScope::kRecipe,
       .member = &Config::dropout,
       .help =
           "dropout probability on attention weights and on both residual branches (training only)",
       .max = 1,
       .max_exclusive = true},
      {.name = "embedding_dropout",
       .group = "model",
       .scope = ConfigScope::kRecipe,
       .member = &Config::embedding_dropout,
       .help = "dropout probability on the embeddings' sum, before the first block (training only; "
               "seeds: 0, nanoGPT: its dropout, GPT-2: embd_pdrop)",
       .max = 1,
       .max_exclusive = true},
      {.name = "bias",
       .group = "model",
       .scope = ConfigScope::kModel,
       .member = &Config::bias,
       .help = "biases in Linear and LayerNorm layers (seed: true; nanoGPT recipe: false)"},
      {.name = "qkv_bias",
       .group = "model",
       .scope = ConfigScope::kModel,
       .member = &Config::qkv_bias,
       .help = "biases on the attention's key, query and value projections, whatever `bias` says "
               "(seed 000: false; seed 004: true)"},
      {.name = "block_order",
       .group = "model",
       .scope = ConfigScope::kModel,
       .member = &Config::block_order,
       .help = "pre_norm: x = x + sa(ln1(x)); x = x + ffwd(ln2(x)) (seed 000, GPT-2); post_norm: "
               "x = ln1(x); x = x + sa(x); x = ln2(x); x = x + ffwd(x), each branch added to the "
               "normalised stream, which replaces the residual one (seed 004)",
       .choices = "pre_norm|post_norm"},
      {.name = "lm_head_bias",
       .group = "model",
       .scope = ConfigScope::kModel,
       .member = &Config::lm_head_bias,
       .help = "with bias: lm_head has a bias too (seed: true; GPT-2: false)"},
      {.name = "activation",
       .group = "model",
       .scope = ConfigScope::kModel,
       .member = &Config::activation,
       .help = "feed-forward nonlinearity: relu (seed), gelu (exact erf, nanoGPT), gelu_tanh (tanh "
               "form, GPT-2)",
       .choices = "relu|gelu|gelu_tanh"},
      {.name = "tie_weights",
       .group = "model",
       .scope = ConfigScope::kModel,
       .member = &Config::tie_weights,
       .help = "share lm_head.weight with token_embedding_table.weight"},
      {.name = "init",
       .group = "model",
       .scope = ConfigScope::kRecipe,
       .member = &Config::init,
       .help = "normal: Linear and Embedding weights N(0, init_std), biases 0 (seed 000, nanoGPT); "
               "torch_default: PyTorch's own, Linear weights and biases U(-1/sqrt(fan_in), "
               "1/sqrt(fan_in)), Embedding N(0, 1) (seed 004); LayerNorm 1 and 0 in both",
       .choices = "normal|torch_default"},
      {.name = "init_std",
       .group = "model",
       .scope = ConfigScope::kRecipe,
       .member = &Config::init_std,
       .help = "standard deviation of the normal init of every Linear and Embedding weight",
       .max = 10},
      {.name = "scaled_residual_init",
       .group = "model",
       .scope = ConfigScope::kRecipe,
       .member = &Config::scaled_residual_init,
       .help =
           "init sa.proj and ffwd.net.2 weights with init_std / sqrt(2 n_layer) (GPT-2, nanoGPT)"},
      {.name = "torch_names",
       .group = "model",
       .scope = ConfigScope::kModel,
       .member = &Config::torch_names,
       .help = "PyTorch names of the checkpoint's tensors: seed000 (its GPTLanguageModel: "
               "token_embedding_table, blocks.N.sa.heads.H.key, ln_f, lm_head) or seed004 (its "
               "AttentionModel: token_emb, blocks.N.multihead.heads.H.k, the final LayerNorm as "
               "blocks.n_layer, out; its scores are k.q^T, so its k is folio's query)",
       .choices = "seed000|seed004"},
      {.name = "vocab_padding",
       .group = "model",
       .scope = ConfigScope::kModel,
       .member = &Config::vocab_padding,
       .help = "round the token embedding's and lm_head's rows up to a multiple of this, for "
               "faster products (llm.c: 50257 -> 50304 with 128); 1: none. The padded rows stay "
               "zero, are never counted in the loss nor sampled, and are not saved",
       .min = 1,
       .max = 1 << 16},
      // data -------------------------------------------------------------------------------
      {.name = "data",
       .group = "data",
       .scope = ConfigScope::kHost,
       .member = &Config::data,
       .help =
           "UTF-8 text file to train on (its characters, or its tokens under --tokenizer or the "
           "model's BPE, tokenised as it loads), or a folder of token files that folio prepare "
           "wrote (train/val .bin or shards); empty: data/tinyshakespeare/input.txt, downloaded "
           "when absent"},
      {.name = "tokenizer",
       .group = "data",
       .scope = ConfigScope::kHost,
       .member = &Config::tokenizer,
       .help = "the tokenizer of --data: gpt2, a tokenizer.json, a folder with one, or a folio "
               "checkpoint of a BPE model (its tokenizer); empty: a "
               "folder's own tokenizer.json, a text's characters (or the model's tokenizer)"},
      {.name = "train_fraction",
       .group = "data",
       .scope = ConfigScope::kRecipe,
       .member = &Config::train_fraction,
       .help = "leading fraction of the text used for training; the rest is validation",
       .max = 1,
       .max_exclusive = true},
      {.name = "sampling",
       .group = "data",
       .scope = ConfigScope::kRecipe,
       .member = &Config::sampling,
       .help =
           "random: windows at random offsets, as the seed; epoch: every window once per epoch, "
           "shuffled per epoch and sharded over ranks, as DistributedSampler",
       .choices = "random|epoch"},
      // optimizer --------------------------------------------------------------------------
      {.name = "batch_size",
       .group = "optimizer",
       .scope = ConfigScope::kRecipe,
       .member = &Config::batch_size,
       .help = "windows per micro-batch (per rank)",
       .min = 1,
       .max = kIntMax},
      {.name = "grad_accum",
       .group = "optimizer",
       .scope = ConfigScope::kRecipe,
       .member = &Config::grad_accum,
       .help = "micro-batches whose gradients are summed before each optimizer step",
       .min = 1,
       .max = kIntMax},
      {.name = "max_iters",
       .group = "optimizer",
       .scope = ConfigScope::kRun,
       .member = &Config::max_iters,
       .help = "optimizer steps to train",
       .max = kIntMax},
      {.name = "learning_rate",
       .group = "optimizer",
       .scope = ConfigScope::kRecipe,
       .member = &Config::learning_rate,
       .help = "peak learning rate of AdamW",
       .max = 10},
      {.name = "beta1",
       .group = "optimizer",
       .scope = ConfigScope::kRecipe,
       .member = &Config::beta1,
       .help = "AdamW first-moment decay",
       .max = 1,
       .max_exclusive = true},
      {.name = "beta2",
       .group = "optimizer",
       .scope = ConfigScope::kRecipe,
       .member = &Config::beta2,
       .help = "AdamW second-moment decay",
       .max = 1,
       .max_exclusive = true},
      {.name = "adam_eps",
       .group = "optimizer",
       .scope = ConfigScope::kRecipe,
       .member = &Config::adam_eps,
       .help = "AdamW epsilon added to sqrt(v); above 0, or a parameter whose gradient is 0 "
               "divides 0 by 0",
       .max = 1,
       .min_exclusive = true},
      {.name = "weight_decay",
       .group = "optimizer",
       .scope = ConfigScope::kRecipe,
       .member = &Config::weight_decay,
       .help = "AdamW decoupled weight decay coefficient",
       .max = 10},
      {.name = "decay_params",
       .group = "optimizer",
       .scope = ConfigScope::kRecipe,
       .member = &Config::decay_params,
       .help =
           "which parameters weight decay applies to: all (torch AdamW default) or matrices (2-D "
           "tensors, as nanoGPT)",
       .choices = "all|matrices"},
      {.name = "lr_schedule",
       .group = "optimizer",
       .scope = ConfigScope::kRecipe,
       .member = &Config::lr_schedule,
       .help = "constant, or cosine: linear warm-up then cosine decay to min_lr at lr_decay_iters "
               "(only cosine reads warmup_iters, lr_decay_iters and min_lr: set with constant, "
               "they are refused)",
       .choices = "constant|cosine"},
      {.name = "warmup_iters",
       .group = "optimizer",
       .scope = ConfigScope::kRecipe,
       .member = &Config::warmup_iters,
       .help = "linear warm-up steps (cosine schedule)",
       .max = kIntMax},
      {.name = "lr_decay_iters",
       .group = "optimizer",
       .scope = ConfigScope::kRecipe,
       .member = &Config::lr_decay_iters,
       .help = "step at which the cosine schedule reaches min_lr",
       .min = 1,
       .max = kIntMax},
      {.name = "min_lr",
       .group = "optimizer",
       .scope = ConfigScope::kRecipe,
       .member = &Config::min_lr,
       .help = "learning rate at the end of the cosine decay",
       .max = 10},
      {.name = "grad_clip",
       .group = "optimizer",
       .scope = ConfigScope::kRecipe,
       .member = &Config::grad_clip,
       .help = "clip the global gradient norm to this value; 0 turns clipping off",
       .max = 1e9},
      // eval -------------------------------------------------------------------------------
      {.name = "eval_interval",
       .group = "eval",
       .scope = ConfigScope::kRecipe,
       .member = &Config::eval_interval,
       .help = "evaluate (and maybe checkpoint) every this many steps, and at the last step",
       .min = 1,
       .max = kIntMax},
      {.name = "eval_iters",
       .group = "eval",
       .scope = ConfigScope::kRecipe,
       .member = &Config::eval_iters,
       .help = "random batches per split in each evaluation",
       .min = 1,
       .max = kIntMax},
      {.name = "log_interval",
       .group = "eval",
       .scope = ConfigScope::kRun,
       .member = &Config::log_interval,
       .help =
           "measure the loss and write a metrics.jsonl record every this many steps (the status "
           "line shows the latest; piped output prints at most one line per 10 s); 0 turns it off",
       .max = kIntMax},
      {.name = "sample_tokens",
       .group = "eval",
       .scope = ConfigScope::kRun,
       .member = &Config::sample_tokens,
       .help = "characters (a BPE model: tokens) sampled before and after training; 0 turns the "
               "samples off",
       .max = kIntMax},
      {.name = "checkpoint_interval",
       .group = "eval",
       .scope = ConfigScope::kRun,
       .member = &Config::checkpoint_interval,
       .help =
           "write the training state (for --resume) every this many steps, and at exit; 0: only at "
           "exit",
       .max = kIntMax},
      {.name = "out_dir",
       .group = "eval",
       .scope = ConfigScope::kHost,
       .member = &Config::out_dir,
       .help = "folder for ckpt.safetensors and metrics.jsonl"},
      // run --------------------------------------------------------------------------------
      {.name = "seed",
       .group = "run",
       .scope = ConfigScope::kRecipe,
       .member = &Config::seed,
       .help = "seed of every random stream (init, batches, dropout, sampling)"},
      {.name = "device",
       .group = "run",
       .scope = ConfigScope::kHost,
       .member = &Config::device,
       .help = "where to compute: auto picks a GPU when there is one",
       .choices = "auto|cpu|cuda"},
      {.name = "dtype",
       .group = "run",
       .scope = ConfigScope::kRecipe,
       .member = &Config::dtype,
       .help = "precision of the matrix products: auto is bf16 on a GPU and fp32 on the CPU; bf16 "
               "rounds their operands to bf16 and accumulates in fp32, with fp32 master weights, "
               "optimizer state and checkpoints (on a CPU without AVX512-BF16 or AMX it is slower "
               "than fp32)",
       .choices = "auto|fp32|bf16"},
      {.name = "tf32",
       .group = "run",
       .scope = ConfigScope::kRecipe,
       .member = &Config::tf32,
       .help =
           "with dtype fp32 on a GPU, run the matrix products on TF32 tensor cores (faster, 10-bit "
           "mantissa products); ignored on the CPU"},
      {.name = "cuda_graph",
       .group = "run",
       .scope = ConfigScope::kHost,
       .member = &Config::cuda_graph,
       .help = "on a GPU, one process: record the training step once as a CUDA graph and replay it "
               "on the steps that read nothing back (the logged ones run op by op); the same bits "
               "either way"},
      {.name = "threads",
       .group = "run",
       .scope = ConfigScope::kHost,
       .member = &Config::threads,
       .help = "CPU threads; 0 means every core available",
       .max = 4096},
      {.name = "batch_split",
       .group = "run",
       .scope = ConfigScope::kHost,
       .member = &Config::batch_split,
       .help = "CPU training: auto splits each micro-batch of a small model (training activations "
               "up to 64 MiB: tiny, seed004, baby) across the threads, each running the whole "
               "forward and backward pass of its share on one core, their gradients summed at "
               "the end (data parallelism inside the process; shares one window apart where the "
               "threads do not divide the batch); off runs every op on every thread. The same step up to the sums' "
               "rounding",
       .choices = "auto|off"},
      {.name = "dist_timeout",
       .group = "run",
       .scope = ConfigScope::kHost,
       .member = &Config::dist_timeout,
       .help = "seconds a rank waits for the others in a collective before stopping with an error",
       .min = 1,
       .max = 1e6},
      // recipe: every rank must agree (the sums are collectives, begun in the same order on each),
      // and with more than two ranks the buckets change the sums' rounding, so a resume keeps it
      {.name = "overlap_gradient_sums",
       .group = "run",
       .scope = ConfigScope::kRecipe,
       .member = &Config::overlap_gradient_sums,
       .help = "several ranks: start summing each block's gradients over the ranks as soon as the "
               "backward pass has left the block, while the blocks below compute (DDP's "
               "buckets; Gloo sums in a thread of its own); false: one sum of the whole gradient "
               "after the pass. Two ranks get the same bits either way; more may differ in "
               "rounding"},
  };
  return keys;
}

const char* scope_name(ConfigScope scope) {
  switch (scope) {
    case ConfigScope::kModel:
      return "model";
    case ConfigScope::kRecipe:
      return "recipe";
    case ConfigScope::kRun:
      return "run";
    case ConfigScope::kHost:
      return "host";
  }
  return "?";
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
    case 1:
      return "int";
    case 2:
      return "float";
    case 3:
      return "bool";
    default:
      return "string";
  }
}

}  // namespace folio
