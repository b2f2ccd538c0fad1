// The op interface. The model calls every computation through a Backend; backend/cpu and
// backend/cuda implement it file for file, and backend/reference holds the plain loops that each
// backend is tested against (tests/test_backend_ops.cpp runs every op of every backend).
//
// Conventions (llm.c's): pointers are device memory of the backend, shapes are in the signature,
// row-major. Backward ops say whether they overwrite (=) or accumulate (+=) each gradient:
// parameter gradients always accumulate, so gradient accumulation and tied weights need nothing
// special. No op allocates: scratch memory a backend needs is sized when it is created.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dropout_mask.h"
#include "core/error.h"
#include "core/host_device.h"

namespace folio {

// The feed-forward nonlinearity: ReLU (the seed), GELU with the exact erf (torch.nn.GELU(),
// nanoGPT), or GELU in its tanh form (GPT-2's gelu_new, nn.GELU(approximate='tanh')). Named in
// configs and checkpoints as "relu", "gelu" and "gelu_tanh".
enum class Activation { kRelu, kGelu, kGeluTanh };

// Who reads an op's output. kNextProduct: the next matrix product (as its input, or as the
// output gradient of a backward product), and nothing after it: a backend whose products read
// bf16 copies of their operands (the CPU with --dtype bf16) then writes that copy alone and
// leaves the fp32 output unwritten. Such tensors, where the backward pass recomputes them
// (activation_plan.h): GELU's output, which feeds ffwd.net.2 alone (GELU's backward reads fc),
// and a pre_norm block's LayerNorm outputs; and always d_fc and d_qkv, which only fc's and qkv's
// backward products read. kAnyOp: every op may read it, as an output usually is.
enum class ReadBy { kAnyOp, kNextProduct };

// Activations of a training step that matrix products alone read, in the forward pass and again in
// the backward pass, so that a backend whose products take bf16 operands may keep them as bf16
// alone, 2 bytes an element (no op reads them at full precision; the products would round them):
//   kReluOutput: a ReLU model's fc, read by fc2's two products and by ReLU's backward, for signs;
//   kQkv: read by attention alone, where attention runs on bf16 products;
//   kAttentionOutput: att, read by proj's two products;
//   kLayerNormOutput: a pre_norm block's ln1 and ln2 outputs, read by qkv's and fc's products,
//     where the step keeps them (keeps_recomputable_activations);
//   kGeluOutput: a GELU model's fc_act, read by fc2's products (GELU's backward reads fc), where
//     the step keeps it.
enum class ProductOperand { kReluOutput, kQkv, kAttentionOutput, kLayerNormOutput, kGeluOutput };

// How a backward op leaves a parameter's gradient: kAdd adds to what is there (gradients
// accumulate over a step's micro-batches), kWrite replaces it (the step's first micro-batch).
enum class GradientUpdate { kAdd, kWrite };

inline const char* activation_name(Activation kind) {
  return kind == Activation::kRelu ? "relu" : kind == Activation::kGelu ? "gelu" : "gelu_tanh";
}
// The kind a (validated) config name stands for.
inline Activation activation_from_name(const std::string& name) {
  return name == "gelu"        ? Activation::kGelu
         : name == "gelu_tanh" ? Activation::kGeluTanh
                               : Activation::kRelu;
}

// One AdamW update, exactly torch.optim.AdamW's (decoupled decay, bias-corrected moments).
struct AdamWStep {
  double learning_rate;
  double beta1, beta2, eps;
  double weight_decay;
  int64_t step;  // 1-based count of updates, for the bias corrections
  // torch.nn.utils.clip_grad_norm_, folded into the update: with clip_squared_norm (one float of
  // device memory, the gradients' squared global norm) every gradient is read times
  // min(1, clip_max_norm / (norm + 1e-6)), the factor torch multiplies them by in place. The
  // gradients themselves stay unclipped: one pass over them less. nullptr: no clipping.
  const float* clip_squared_norm = nullptr;
  float clip_max_norm = 0.0f;

  // The factor, from the squared norm as read from clip_squared_norm; in fp32, as torch.
  FOLIO_HOST_DEVICE float clip_coefficient(float squared_norm) const {
    const float coefficient = clip_max_norm / (sqrtf(squared_norm) + 1e-6f);
    return coefficient < 1.0f ? coefficient : 1.0f;
  }
};

// How a backend computes (config keys dtype and tf32). The last two switches are rungs of
// `folio bench --ladder`, which turns the optimisations on one at a time; all else leaves them on.
struct BackendOptions {
  std::string dtype = "auto";   // auto (bf16 on a GPU, fp32 on the CPU), fp32 or bf16
  bool tf32 = false;            // fp32 matrix products on TF32 tensor cores (GPU only)
  bool flash_attention = true;  // false: attention writes out the (B, H, T, T) probabilities
  bool fused_kernels = true;    // false: each op its own kernels, bias adds and conversions too
  int device_index = 0;         // which visible GPU: a rank's local rank, modulo the GPU count
};

// What changes from one replay of a recorded training step to the next (begin_step_capture).
struct StepValues {
  uint32_t dropout_step = 0;   // DropoutSpec::step of every dropout in the step
  double learning_rate = 0.0;  // AdamWStep::learning_rate of every adamw_update in the step
  int64_t adamw_step = 1;      // AdamWStep::step
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu" or "cuda"
  virtual std::string description() const = 0;  // e.g. "cpu (2 threads, oneDNN sgemm)"
  virtual int threads() const = 0;

  // ---- memory ------------------------------------------------------------------------------
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* pointer) = 0;
  virtual void copy_to_device(void* device, const void* host, size_t bytes) = 0;
  virtual void copy_to_host(void* host, const void* device, size_t bytes) = 0;
  virtual void copy_device(void* to, const void* from, size_t bytes) = 0;
  virtual void fill_zero(void* device, size_t bytes) = 0;
  virtual void synchronize() = 0;

  // ---- embedding: out[b,t,:] = wte[tokens[b,t],:] + wpe[first_position + t,:] ---------------
  virtual void embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                 const float* wpe, int B, int T, int C, int first_position) = 0;
  // dwte += scatter of dout by token, dwpe[t] += sum over b of dout[b,t]
  virtual void embedding_backward(float* dwte, float* dwpe, const float* dout,
                                  const int32_t* tokens, int B, int T, int C) = 0;

  // ---- layernorm over the last axis (eps 1e-5); bias may be null ----------------------------
  // Saves mean and rstd = 1/sqrt(var + eps) per row for the backward pass (which reads inp,
  // mean and rstd, never out). out_read_by: see ReadBy (a pre_norm block's ln1 and ln2 outputs
  // feed one product each, where the backward pass recomputes them).
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                 const float* weight, const float* bias, int N, int C,
                                 ReadBy out_read_by) = 0;
  // dinp +=, dweight +=, dbias += (bias gradient skipped when dbias is null)
  virtual void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const float* inp, const float* weight, const float* mean,
                                  const float* rstd, int N, int C) = 0;

  // ---- linear layer: out = inp @ weight^T + bias (torch.nn.Linear); bias may be null --------
  virtual void matmul_forward(float* out, const float* inp, const float* weight,
                              const float* bias, int N, int IC, int OC) = 0;
  // dinp = (skipped when null); dweight and dbias (skipped when null) += with kAdd, = with
  // kWrite: a step's first micro-batch writes its weight gradients rather than adding them to
  // zeros (at GPT-2 124M, zeroing 500 MB and reading it back in the products was 4% of a step).
  virtual void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, int N, int IC, int OC,
                               GradientUpdate update) = 0;

  // ---- causal multi-head attention -----------------------------------------------------------
  // qkv is (B, T, 3A) with A = H * head_size: queries in [0, A), keys in [A, 2A), values in
  // [2A, 3A), head h in columns [h*hs, (h+1)*hs) of each. out is (B, T, A), the heads
  // concatenated: softmax(q k^T / sqrt(hs), causal) with dropout on the weights, times v.
  // `saved` (attention_saved_floats() floats) keeps what the backward pass needs: the CPU each
  // query row's log-sum-exp, from which its backward pass recomputes the probabilities; the GPU's
  // flash kernels that and a copy of out; its unfused path the (B, H, T, T) probabilities.
  // Only query rows t >= q_start are computed (rows before are already in out: the key/value
  // cache of generation); training uses q_start = 0.
  virtual size_t attention_saved_floats(int B, int T, int H, int head_size) const = 0;
  virtual void attention_forward(float* out, float* saved, const float* qkv, int B, int T, int H,
                                 int head_size, int q_start, const DropoutSpec& dropout) = 0;
  // dqkv = (all of it); dout is (B, T, A). dqkv_read_by: see ReadBy (the model's dqkv feeds the
  // qkv layer's backward products alone)
  virtual void attention_backward(float* dqkv, const float* dout, const float* qkv,
                                  const float* saved, int B, int T, int H, int head_size,
                                  const DropoutSpec& dropout, ReadBy dqkv_read_by) = 0;

  // ---- elementwise nonlinearity (ReLU, exact erf GELU, or tanh GELU: see Activation) --------
  // Both may run in place (out == inp, dinp == dout). For ReLU, activation_backward's inp may be
  // the forward's output instead of its input: out > 0 exactly where inp > 0. read_by: see ReadBy
  // (kNextProduct: out may be left unwritten, its bf16 copy made for the product instead).
  virtual void activation_forward(float* out, const float* inp, size_t n, Activation kind,
                                  ReadBy read_by) = 0;
  // dinp = dout * activation'(inp); dinp_read_by as activation_forward's read_by (the model's
  // d_fc is read by the product of fc's backward alone)
  virtual void activation_backward(float* dinp, const float* dout, const float* inp, size_t n,
                                   Activation kind, ReadBy dinp_read_by) = 0;

  // ---- residual branch: out = residual + dropout(branch), per sample of `per_sample` values ---
  // residual may be null: out = dropout(branch) (the embeddings' dropout). Elementwise, so out
  // may be branch, and dbranch dout.
  virtual void dropout_add_forward(float* out, const float* residual, const float* branch, int B,
                                   size_t per_sample, const DropoutSpec& dropout) = 0;
  // dbranch = dout * mask / (1 - p); the residual's gradient is dout itself
  virtual void dropout_add_backward(float* dbranch, const float* dout, int B, size_t per_sample,
                                    const DropoutSpec& dropout) = 0;

  // ---- cross-entropy of softmax(logits) against targets, per row -----------------------------
  // logits and dlogits are (N, Vp), Vp >= V: the softmax runs over the first V columns of each
  // row (the vocabulary); columns V..Vp-1 are vocabulary padding, never read.
  virtual void cross_entropy_forward(float* losses, const float* logits, const int32_t* targets,
                                     int N, int V, int Vp) = 0;
  // dlogits = (softmax(logits) - onehot(target)) * dloss in the first V columns, 0 in the padding.
  // May run in place (dlogits == logits): each row is read whole before its gradient replaces it.
  // The model does, so that no (N, Vp) gradient is kept beside the logits (GPT-2: 206 MB at
  // B * T = 1024, 13 GB at the GPU's B 64, T 1024). The model's dlogits are read by the lm_head's
  // backward products alone (ReadBy::kNextProduct).
  virtual void cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets,
                                      int N, int V, int Vp, float dloss,
                                      ReadBy dlogits_read_by) = 0;

  // ---- optimizer and reductions ---------------------------------------------------------------
  virtual void adamw_update(float* params, const float* grads, float* m, float* v, size_t n,
                            const AdamWStep& step) = 0;
  // *result = sum of x (result is one float of device memory)
  virtual void sum(float* result, const float* x, size_t n) = 0;
  // *result = sum of x^2
  virtual void sum_of_squares(float* result, const float* x, size_t n) = 0;
  // x *= factor
  virtual void scale(float* x, size_t n, float factor) = 0;

  // ---- fused pairs: two ops above in one pass over memory -------------------------------------
  // The defaults run the two ops; a GPU backend, where every pass is a trip to memory, fuses them.
  // residual_out = residual + dropout(branch), then ln_out = layernorm(residual_out): the arguments
  // of dropout_add_forward, then of layernorm_forward over its B * per_sample / C rows.
  virtual void dropout_add_layernorm_forward(float* residual_out, float* ln_out, float* mean,
                                             float* rstd, const float* residual,
                                             const float* branch, const float* weight,
                                             const float* bias, int B, size_t per_sample, int C,
                                             const DropoutSpec& dropout, ReadBy ln_out_read_by) {
    dropout_add_forward(residual_out, residual, branch, B, per_sample, dropout);
    layernorm_forward(ln_out, mean, rstd, residual_out, weight, bias,
                      static_cast<int>(B * per_sample / C), C, ln_out_read_by);
  }
  // layernorm_backward (dinp +=, dweight +=, dbias +=), then dbranch = dropout_add_backward of
  // the updated dinp: from a LayerNorm's output back into the residual branch that fed it.
  virtual void layernorm_dropout_add_backward(float* dinp, float* dbranch, float* dweight,
                                              float* dbias, const float* dout, const float* inp,
                                              const float* weight, const float* mean,
                                              const float* rstd, int B, size_t per_sample, int C,
                                              const DropoutSpec& dropout) {
    layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd,
                       static_cast<int>(B * per_sample / C), C);
    dropout_add_backward(dbranch, dinp, B, per_sample, dropout);
  }

  // pre = inp @ weight^T + bias, then out = activation(pre): matmul_forward's arguments and
  // activation_forward's output and its readers (pre is kept: activation_backward reads it). pre
  // and out may be the same tensor (a ReLU model keeps only ReLU's output).
  virtual void matmul_activation_forward(float* pre, float* out, const float* inp,
                                         const float* weight, const float* bias, int N, int IC,
                                         int OC, Activation kind, ReadBy out_read_by) {
    matmul_forward(pre, inp, weight, bias, N, IC, OC);
    activation_forward(out, pre, static_cast<size_t>(N) * OC, kind, out_read_by);
  }

  // dpre = dout @ weight with dweight and dbias as matmul_backward's (the backward products of the
  // layer after an activation: fc2's), then dpre = dpre * activation'(pre) in place
  // (activation_backward, pre its inp: for ReLU its kept output will do). dpre_read_by as
  // activation_backward's.
  virtual void matmul_backward_into_activation(float* dpre, float* dweight, float* dbias,
                                               const float* dout, const float* inp,
                                               const float* weight, const float* pre, int N, int IC,
                                               int OC, GradientUpdate update, Activation kind,
                                               ReadBy dpre_read_by) {
    matmul_backward(dpre, dweight, dbias, dout, inp, weight, N, IC, OC, update);
    activation_backward(dpre, dpre, pre, static_cast<size_t>(N) * IC, kind, dpre_read_by);
  }

  // ---- hooks for accelerators; the defaults are what the CPU needs ----------------------------
  // Where the model's flat fp32 parameters are: a backend computing matrix products in bf16 keeps
  // a bf16 copy of them, which adamw_update refreshes as it writes the parameters.
  virtual void set_parameter_buffer(const float* /*parameters*/, size_t /*count*/) {}
  // The device's datasheet peak (FLOP/s) for dense matrix products in the type this backend
  // computes them in, for MFU; 0 when there is none to trust (the CPU's is measured, train/mfu.h).
  virtual double peak_flops() const { return 0.0; }
  // Whether a training step keeps every layer's LayerNorm and GELU outputs (true), `bytes` in all,
  // or one buffer of each for all layers, which backward() refills from the layer's kept inputs
  // just before the product that reads them (activation_plan.h). The CPU recomputes where the
  // kept tensors would be large: 15-28% less memory for a pass over one tensor, a few per cent
  // of a large model's step; a small model (`baby`, 5 MiB of them) keeps them, since there the
  // passes are a tenth of its step and the memory nothing (cpu_backend.h). A GPU keeps them: each
  // pass is a kernel in a step of a few milliseconds, and its bf16 copies of kept tensors outlive
  // the forward pass.
  virtual bool keeps_recomputable_activations(size_t /*bytes*/) const { return false; }
  // Whether this backend keeps `tensor` (of a model with heads of head_size) as bf16 alone: true
  // where every op reading it rounds it to bf16 first (the CPU with --dtype bf16). The activation
  // plan then carves it at 2 bytes an element and says where with store_as_bf16; the model offsets
  // into it in bf16 elements.
  virtual bool keeps_as_bf16(ProductOperand /*tensor*/, int /*head_size*/) const { return false; }
  // The `count` elements at `tensor` (memory of this backend) hold bf16 values from now until the
  // memory is released: every op writing or reading them there writes or reads bf16.
  virtual void store_as_bf16(const float* /*tensor*/, size_t /*count*/) {
    throw Error("internal: the " + name() + " backend keeps no tensor as bf16");
  }
  // Whether reading a few bytes back (a step's loss, the gradients' norm) costs nothing: true where
  // device memory is the host's (the CPU), so the trainer checks every step; a GPU's read waits for
  // all the work queued before it, so the trainer reads only on the steps it logs.
  virtual bool reads_back_for_free() const { return true; }
  // The stream (cudaStream_t) this backend issues its work to, for collectives (NCCL) that must
  // queue behind it; nullptr for a backend without one.
  virtual void* native_stream() const { return nullptr; }

  // ---- the batch split across threads (data parallelism inside one process; the CPU) ----------
  // A small model's ops (a few hundred tokens of a narrow network) are too short to keep several
  // threads busy: each op's threads meet at its end, and with two threads of `tiny` those meetings
  // and the hand-offs of each op's rows to the other core were a quarter of the step. Split
  // instead, each thread runs the whole forward and backward pass of its share of the batch on a
  // twin backend of one thread (TrainingStep), and the shares' gradients are summed once at the
  // end, as data-parallel ranks' are. batch_split_ways: how many shares a training step of
  // `batch_size` windows should use, for a model whose training activations take
  // `activation_bytes`; 1: none (the default: every op uses every thread).
  virtual int batch_split_ways(int /*batch_size*/, size_t /*activation_bytes*/) const { return 1; }
  // A backend computing as this one does on one thread, whose memory this one's ops may read
  // (host memory): one share's.
  virtual std::unique_ptr<Backend> make_twin() const {
    throw Error("internal: the " + name() + " backend splits no batch across threads");
  }
  // Runs share(i) for every i < ways at once, share i on thread i (whose ops run on twin i), then
  // sum[j] = parts[0][j] + parts[1][j] + ... for j < n, added in the order of the parts (the same
  // bits every run). An exception thrown by a share is thrown here, after every share has ended.
  virtual void run_batch_split(int /*ways*/, const std::function<void(int share)>& /*share*/,
                               float* /*sum*/, const std::vector<const float*>& /*parts*/,
                               size_t /*n*/) {
    throw Error("internal: the " + name() + " backend splits no batch across threads");
  }

  // ---- a training step recorded once and replayed (CUDA graphs) -------------------------------
  // Between begin_step_capture() and end_step_capture() ops are recorded, not run; each
  // replay_step() runs the recording. Frozen at capture: every shape, pointer and dropout
  // probability. A replay changes the StepValues (dropout ops and adamw_update read them on the
  // device) and the bytes of every copy_to_device made while capturing, which each replay copies
  // again from the same host address: those host buffers must stay put and hold the new step's
  // data (one token buffer per micro-batch). Nothing may be read back, synchronised, allocated or
  // released while capturing; run one step uncaptured first, so that scratch memory exists.
  virtual bool supports_step_capture() const { return false; }
  virtual void begin_step_capture() {
    throw Error("internal: the " + name() + " backend cannot record training steps");
  }
  virtual void end_step_capture() {}
  virtual void replay_step(const StepValues& /*values*/) {}
  // How many times device memory has been freed: a recording holds the addresses it used, so one
  // made at another count (scratch memory that grew since, a buffer released) must be made again
  // before it replays (TrainingStep::replay_or_record).
  virtual uint64_t device_memory_frees() const { return 0; }
};

// "cpu", "cuda" or "auto" (a GPU when one is there); `threads` 0 means all cores. On the CPU,
// dtype bf16 rounds the linear layers' operands to bf16 (fp32 sums); auto there means fp32.
std::unique_ptr<Backend> make_backend(const std::string& device, int threads,
                                      const BackendOptions& options = {});
bool cuda_available();     // compiled with CUDA and a GPU is visible
int visible_gpu_count();  // 0 without CUDA

}  // namespace folio
