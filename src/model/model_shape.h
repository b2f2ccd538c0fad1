// The network's structure: what the parameter layout and the activation plan are built from.
#pragma once

#include "backend/backend.h"
#include "config/config.h"
#include "core/error.h"

namespace folio {

// The block's wiring (config key block_order):
//   kPreNorm   x = x + sa(ln1(x)); x = x + ffwd(ln2(x))          (seed 000, GPT-2)
//   kPostNorm  x = ln1(x); x = x + sa(x); x = ln2(x); x = x + ffwd(x)   (seed 004: each branch is
//              added to the normalised stream, which replaces the residual one)
enum class BlockOrder { kPreNorm, kPostNorm };

// Whose PyTorch module names a checkpoint's tensors carry (config key torch_names; io/torch_names).
enum class TorchNames { kSeed000, kSeed004 };

struct ModelShape {
  int vocab_size = 0;
  int block_size = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_embd = 0;
  int head_size = 0;
  bool bias = true;
  bool qkv_bias = false;
  bool tie_weights = false;
  Activation activation = Activation::kRelu;
  BlockOrder block_order = BlockOrder::kPreNorm;
  TorchNames torch_names = TorchNames::kSeed000;

  int attention_width() const { return n_head * head_size; }  // A: the heads concatenated
  int hidden_width() const { return 4 * n_embd; }              // feed-forward hidden size

  static ModelShape from_config(const Config& config, int vocab_size) {
    ModelShape shape;
    shape.vocab_size = vocab_size;
    shape.block_size = config.block_size;
    shape.n_layer = config.n_layer;
    shape.n_head = config.n_head;
    shape.n_embd = config.n_embd;
    shape.head_size = config.effective_head_size();
    shape.bias = config.bias;
    shape.qkv_bias = config.qkv_bias;
    shape.tie_weights = config.tie_weights;
    shape.activation = activation_from_name(config.activation);
    shape.block_order =
        config.block_order == "post_norm" ? BlockOrder::kPostNorm : BlockOrder::kPreNorm;
    shape.torch_names = config.torch_names == "seed004" ? TorchNames::kSeed004 : TorchNames::kSeed000;
    return shape;
  }
};

}  // namespace folio
