// The op interface. The model calls every computation through a Backend; backend/cpu and
// backend/cuda implement it file for file, and backend/reference holds the plain loops that each
// backend is tested against (tests/test_backend_ops.cpp runs every op of every backend).
//
// Conventions (llm.c's): pointers are device memory of the backend, shapes are in the signature,
// row-major. Backward ops say whether they overwrite (=) or accumulate (+=) each gradient:
// parameter gradients always accumulate, so gradient accumulation and tied weights need nothing
// special. No op allocates: scratch memory a backend needs is sized when it is created.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/dropout_mask.h"

namespace folio {

enum class Activation { kRelu, kGelu };

// One AdamW update, exactly torch.optim.AdamW's (decoupled decay, bias-corrected moments).
struct AdamWStep {
  double learning_rate;
  double beta1, beta2, eps;
  double weight_decay;
  int64_t step;  // 1-based count of updates, for the bias corrections
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
  // Saves mean and rstd = 1/sqrt(var + eps) per row for the backward pass.
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                 const float* weight, const float* bias, int N, int C) = 0;
  // dinp +=, dweight +=, dbias += (bias gradient skipped when dbias is null)
  virtual void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const float* inp, const float* weight, const float* mean,
                                  const float* rstd, int N, int C) = 0;

  // ---- linear layer: out = inp @ weight^T + bias (torch.nn.Linear); bias may be null --------
  virtual void matmul_forward(float* out, const float* inp, const float* weight,
                              const float* bias, int N, int IC, int OC) = 0;
  // dinp = (skipped when null), dweight +=, dbias += (skipped when null)
  virtual void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, int N, int IC, int OC) = 0;

  // ---- causal multi-head attention -----------------------------------------------------------
  // qkv is (B, T, 3A) with A = H * head_size: queries in [0, A), keys in [A, 2A), values in
  // [2A, 3A), head h in columns [h*hs, (h+1)*hs) of each. out is (B, T, A), the heads
  // concatenated: softmax(q k^T / sqrt(hs), causal) with dropout on the weights, times v.
  // `saved` (attention_saved_floats() floats) keeps what the backward pass needs: the CPU keeps
  // the (B, H, T, T) probabilities, a flash-style GPU kernel only each row's log-sum-exp.
  // Only query rows t >= q_start are computed (rows before are already in out: the key/value
  // cache of generation); training uses q_start = 0.
  virtual size_t attention_saved_floats(int B, int T, int H, int head_size) const = 0;
  virtual void attention_forward(float* out, float* saved, const float* qkv, int B, int T, int H,
                                 int head_size, int q_start, const DropoutSpec& dropout) = 0;
  // dqkv = (all of it); dout is (B, T, A)
  virtual void attention_backward(float* dqkv, const float* dout, const float* qkv,
                                  const float* saved, int B, int T, int H, int head_size,
                                  const DropoutSpec& dropout) = 0;

  // ---- elementwise nonlinearity (ReLU, or exact erf GELU as torch.nn.GELU()) ----------------
  virtual void activation_forward(float* out, const float* inp, size_t n, Activation kind) = 0;
  // dinp =
  virtual void activation_backward(float* dinp, const float* dout, const float* inp, size_t n,
                                   Activation kind) = 0;

  // ---- residual branch: out = residual + dropout(branch), per sample of `per_sample` values ---
  virtual void dropout_add_forward(float* out, const float* residual, const float* branch, int B,
                                   size_t per_sample, const DropoutSpec& dropout) = 0;
  // dbranch = dout * mask / (1 - p); the residual's gradient is dout itself
  virtual void dropout_add_backward(float* dbranch, const float* dout, int B, size_t per_sample,
                                    const DropoutSpec& dropout) = 0;

  // ---- cross-entropy of softmax(logits) against targets, per row -----------------------------
  virtual void cross_entropy_forward(float* losses, const float* logits, const int32_t* targets,
                                     int N, int V) = 0;
  // dlogits = (softmax(logits) - onehot(target)) * dloss
  virtual void cross_entropy_backward(float* dlogits, const float* logits,
                                      const int32_t* targets, int N, int V, float dloss) = 0;

  // ---- optimizer and reductions ---------------------------------------------------------------
  virtual void adamw_update(float* params, const float* grads, float* m, float* v, size_t n,
                            const AdamWStep& step) = 0;
  // *result = sum of x (result is one float of device memory)
  virtual void sum(float* result, const float* x, size_t n) = 0;
  // *result = sum of x^2
  virtual void sum_of_squares(float* result, const float* x, size_t n) = 0;
  // x *= min(1, max_norm / (sqrt(*squared_norm) + 1e-6)), as torch.nn.utils.clip_grad_norm_
  virtual void clip_by_norm(float* x, size_t n, const float* squared_norm, float max_norm) = 0;
  // x *= factor
  virtual void scale(float* x, size_t n, float factor) = 0;
};

// "cpu", "cuda" or "auto" (a GPU when one is there); `threads` 0 means all cores.
std::unique_ptr<Backend> make_backend(const std::string& device, int threads);
bool cuda_available();  // compiled with CUDA and a GPU is visible

}  // namespace folio
