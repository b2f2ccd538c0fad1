// The network's structure: what the parameter layout and the activation plan are built from.
#pragma once

#include "backend/backend.h"
#include "config/config.h"
#include "core/error.h"

namespace folio {

struct ModelShape {
  int vocab_size = 0;
  int block_size = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_embd = 0;
  int head_size = 0;
  bool bias = true;
  bool tie_weights = false;
  Activation activation = Activation::kRelu;

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
    shape.tie_weights = config.tie_weights;
    shape.activation = activation_from_name(config.activation);
    return shape;
  }
};

}  // namespace folio
