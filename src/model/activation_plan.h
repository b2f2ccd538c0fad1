// Every intermediate tensor of a forward and backward pass at a given (B, T), carved once out of
// one allocation: nothing is allocated inside a training step. What each buffer keeps, and why:
// the backward pass needs each op's inputs (and LayerNorm's mean and rstd, and what attention
// saves: each query row's log-sum-exp, so that no (B, H, T, T) tensor is kept and the plan grows
// with B * T, not B * T * T, wherever the backend computes attention in tiles); branch outputs
// before their dropout + residual add are not needed again, so all layers share one `branch`
// buffer. ReLU models keep only ReLU's output (fc_act, the widest tensor with fc), which says
// where its derivative is 0 as well as fc would (relu_in_place). Where the backend recomputes
// (`recomputes`: the CPU, for a model whose kept LayerNorm and GELU outputs would be larger than
// its budget, Backend::keeps_recomputable_activations) GELU models keep fc and share one fc_act
// among all layers, and no layer keeps its LayerNorm outputs (a row's output is its input, the
// kept residual stream, normalised):
// all ln1 outputs share one buffer, all ln2 outputs another, and the backward pass refills each
// from the layer's kept input just before the weight-gradient product reads it. In bf16 each such
// pass writes the product's bf16 operand, which the product would otherwise have made in a pass
// of its own over the kept tensor, so it costs about nothing there; GELU's output and a pre_norm
// block's LayerNorm outputs, read by one product after each writing, are written as that
// product's bf16 operand alone (fc_act_read_by, block_ln_read_by), so with bf16 products the
// shared fc_act, ln1 and ln2 are never touched. Gradients of activations that are
// never live at once share memory too (activation_plan.cpp), and the logits' gradient replaces
// the logits. A bf16 training step's peak memory (Zen 4, 2 threads, docs/performance_cpu.md
// "Recomputed, not kept"): shakespeare_char 2433 -> 2069 -> 2023 MiB, nanogpt_char (GELU) 3007 ->
// 2163 -> 2021.
//
// A plan without gradients (evaluation, generation) keeps per layer only `qkv`: generation's
// key/value cache, which later forward passes read. Everything else a layer writes is read by the
// next op of the same pass and never again, so all layers share layer 0's buffers: for gpt2-xl
// at T = 1024 that is 0.09 GB instead of 4.1 GB, beside the 0.94 GB of qkv.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/device_buffer.h"
#include "model/model_shape.h"

namespace folio {

struct LayerActivations {
  float *ln1, *ln1_mean, *ln1_rstd;  // (BT, C), (BT), (BT); shared when the plan recomputes
  float* qkv;                         // (BT, 3A)
  float* attention_saved;             // what attention_backward needs (backend-defined size)
  float* att;                         // (BT, A) heads concatenated
  float* residual_mid;                // (BT, C) x + sa(ln1(x)) (post_norm: ln1(x) + sa(ln1(x)))
  float *ln2, *ln2_mean, *ln2_rstd;  // (BT, C), (BT), (BT); likewise
  float* fc;                          // (BT, 4C) before the nonlinearity (ReLU: after it)
  float* fc_act;                      // (BT, 4C) after it: fc itself when relu_in_place
  float* residual_out;                // (BT, C) the block's output
};

// Row `first` of a tensor of rows `width` wide, of 4-byte elements or of bf16 ones (a tensor the
// plan keeps as bf16: the model's pointers stay float*, the backend reads what store_as_bf16 said).
inline float* bf16_rows(float* tensor, size_t first, size_t width, bool in_bf16) {
  if (!in_bf16) return tensor + first * width;
  return reinterpret_cast<float*>(reinterpret_cast<uint16_t*>(tensor) + first * width);
}

struct ActivationPlan {
  int B = 0, T = 0;
  bool with_gradients = false;
  // ReLU's derivative is the same read from its output as from its input (out > 0 exactly when
  // in > 0), so a ReLU model keeps only the output: fc_act is fc, written in place.
  bool relu_in_place = false;
  bool post_norm = false;  // seed 004's blocks: each LayerNorm's output replaces the stream
  // Training keeps one ln1, one ln2 and one GELU output for all layers, and the backward pass
  // recomputes each layer's (the backend's choice: Backend::keeps_recomputable_activations).
  bool recomputes = false;
  DeviceBuffer memory;

  // Who reads fc_act. Where the plan recomputes GELU's output, each writing of it (the forward
  // pass, the backward's refill) is read by one product of ffwd.net.2 and nothing else (GELU's
  // backward reads fc), so the backend may write only that product's bf16 operand. A kept GELU
  // output is read twice (forward and backward), and ReLU's is fc, whose signs its backward reads.
  ReadBy fc_act_read_by() const {
    return recomputes && !relu_in_place ? ReadBy::kNextProduct : ReadBy::kAnyOp;
  }
  // Training's tensors that products alone read, kept as bf16 where the backend says so
  // (Backend::keeps_as_bf16, ProductOperand): each layer's fc of a ReLU model, qkv, att. They are
  // carved at 2 bytes an element and offset in bf16 elements (bf16_rows). With bf16 products on
  // a CPU with bf16 attention, shakespeare_char's step keeps 6 x (48 + 36 + 12) MiB less. An
  // inference plan keeps qkv alone so (the key/value cache of generation).
  bool fc_in_bf16 = false, qkv_in_bf16 = false, att_in_bf16 = false;
  // Where the plan keeps them (not `recomputes`): a pre_norm block's ln1 and ln2 outputs and a
  // GELU model's fc_act, read by products alone, as bf16 (kLayerNormOutput, kGeluOutput).
  bool ln_in_bf16 = false, fc_act_in_bf16 = false;
  // Who reads a block's ln1 and ln2 outputs. Where the plan recomputes them, a pre_norm block's
  // are read by one product after each writing (qkv's, fc's; LayerNorm's backward reads its input
  // and statistics); post_norm's are the residual stream as well. ln_f's output is kept for the
  // lm_head's weight gradient: not one of these.
  ReadBy block_ln_read_by() const {
    return recomputes && !post_norm ? ReadBy::kNextProduct : ReadBy::kAnyOp;
  }

  int32_t *tokens = nullptr, *targets = nullptr;  // (BT) on the device
  float* embedded = nullptr;                        // (BT, C) the residual stream into block 0
  std::vector<LayerActivations> layers;
  float *lnf = nullptr, *lnf_mean = nullptr, *lnf_rstd = nullptr;
  float* logits = nullptr;    // (BT, Vp): Vp = padded_vocab_size
  float* losses = nullptr;    // (BT)
  float* loss_sum = nullptr;  // (1)
  float* branch = nullptr;    // (BT, C) scratch: sa.proj or ffwd.net.2 output before dropout
  // Generation of several texts at once (GPT::forward_next_tokens), whose key/value caches are
  // each layer's qkv, text b's b * T rows in: the one new row of each text, its queries, keys and
  // values (B, 3A) before they join the text's cache (stored as qkv is), and its attention output
  // (B, A) once its heads have read that cache (stored as att is).
  float* next_qkv = nullptr;
  float* next_att = nullptr;

  // Gradients of activations (only with_gradients).
  float* d_residual = nullptr;  // (BT, C) running gradient of the residual stream
  // (BT, C) post_norm only: the gradient of a block's residual_mid, while d_residual still holds
  // that of its output (both feed ln2's backward); pre_norm keeps one running gradient.
  float* d_residual_mid = nullptr;
  float* d_ln = nullptr;        // (BT, C) gradient of a LayerNorm output
  float* d_branch = nullptr;    // (BT, C)
  float* d_att = nullptr;       // (BT, A)
  float* d_qkv = nullptr;       // (BT, 3A)
  float* d_fc = nullptr;        // (BT, 4C) fc_act's gradient, then fc's in its place
  float* d_logits = nullptr;    // (BT, Vp) the logits' own memory: their gradient replaces them

  size_t bytes() const { return memory.bytes(); }
};

ActivationPlan plan_activations(Backend& backend, const ModelShape& shape, int B, int T,
                                bool with_gradients);

}  // namespace folio
