// `folio bench --profile`: a Backend that runs every op on another backend and times it, waiting
// for the device after each, so that a training step's time splits by op kind (forward and
// backward apart, the optimizer's ops as one group). Waiting after every op costs a GPU its
// overlap, so the profile explains a step without being one; the CPU runs ops one after the
// other anyway, and its profile adds up to the step's time.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace folio {

struct OpTime {
  double seconds = 0;
  double flops = 0;  // matrix products only, for their GFLOP/s
  long calls = 0;
};

// Not final: a test derives from it to change one of the inner backend's answers.
class ProfilingBackend : public Backend {
 public:
  explicit ProfilingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  // Time per op kind ("layernorm forward", "adamw", ...) since the last reset().
  const std::map<std::string, OpTime>& times() const { return times_; }
  void reset() { times_.clear(); }

  std::string name() const override { return inner_->name(); }
  std::string description() const override { return inner_->description(); }
  int threads() const override { return inner_->threads(); }
  void* allocate(size_t bytes) override { return inner_->allocate(bytes); }
  void release(void* pointer) override { inner_->release(pointer); }
  void copy_to_device(void* device, const void* host, size_t bytes) override;
  void copy_to_host(void* host, const void* device, size_t bytes) override;
  void copy_device(void* to, const void* from, size_t bytes) override;
  void fill_zero(void* device, size_t bytes) override;
  void synchronize() override { inner_->synchronize(); }

  void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                         int B, int T, int C, int first_position) override;
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                          int B, int T, int C) override;
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, int N, int C,
                         ReadBy out_read_by) override;
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, const float* mean,
                          const float* rstd, int N, int C) override;
  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                      int IC, int OC) override;
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, int N, int IC, int OC,
                       GradientUpdate update) override;
  size_t attention_saved_floats(int B, int T, int H, int head_size) const override {
    return inner_->attention_saved_floats(B, T, H, head_size);
  }
  void attention_forward(float* out, float* saved, const float* qkv, int B, int T, int H,
                         int head_size, int q_start, const DropoutSpec& dropout) override;
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* saved,
                          int B, int T, int H, int head_size, const DropoutSpec& dropout,
                          ReadBy dqkv_read_by) override;
  void activation_forward(float* out, const float* inp, size_t n, Activation kind,
                          ReadBy read_by) override;
  void activation_backward(float* dinp, const float* dout, const float* inp, size_t n,
                           Activation kind, ReadBy dinp_read_by) override;
  // The fused pairs go to the inner backend whole, as the model calls them: split into their two
  // ops here they would run another path than a step's (and the CPU's keeps fc as bf16 alone for
  // a ReLU model, which only the fused op writes), so each is timed as one row of its own.
  void matmul_activation_forward(float* pre, float* out, const float* inp, const float* weight,
                                 const float* bias, int N, int IC, int OC, Activation kind,
                                 ReadBy out_read_by) override;
  void matmul_backward_into_activation(float* dpre, float* dweight, float* dbias, const float* dout,
                                       const float* inp, const float* weight, const float* pre,
                                       int N, int IC, int OC, GradientUpdate update,
                                       Activation kind, ReadBy dpre_read_by) override;
  void dropout_add_forward(float* out, const float* residual, const float* branch, int B,
                           size_t per_sample, const DropoutSpec& dropout) override;
  void dropout_add_backward(float* dbranch, const float* dout, int B, size_t per_sample,
                            const DropoutSpec& dropout) override;
  void cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int N,
                             int V, int Vp) override;
  void cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets, int N,
                              int V, int Vp, float dloss, ReadBy dlogits_read_by) override;
  void adamw_update(float* params, const float* grads, float* m, float* v, size_t n,
                    const AdamWStep& step) override;
  void sum(float* result, const float* x, size_t n) override;
  void sum_of_squares(float* result, const float* x, size_t n) override;
  void scale(float* x, size_t n, float factor) override;
  void dropout_add_layernorm_forward(float* residual_out, float* ln_out, float* mean, float* rstd,
                                     const float* residual, const float* branch,
                                     const float* weight, const float* bias, int B,
                                     size_t per_sample, int C, const DropoutSpec& dropout,
                                     ReadBy ln_out_read_by) override;
  void layernorm_dropout_add_backward(float* dinp, float* dbranch, float* dweight, float* dbias,
                                      const float* dout, const float* inp, const float* weight,
                                      const float* mean, const float* rstd, int B,
                                      size_t per_sample, int C,
                                      const DropoutSpec& dropout) override;
  void set_parameter_buffer(const float* parameters, size_t count) override {
    inner_->set_parameter_buffer(parameters, count);
  }
  double peak_flops() const override { return inner_->peak_flops(); }
  void* native_stream() const override { return inner_->native_stream(); }
  bool reads_back_for_free() const override { return inner_->reads_back_for_free(); }
  bool keeps_recomputable_activations(size_t bytes) const override {
    return inner_->keeps_recomputable_activations(bytes);
  }
  bool keeps_as_bf16(ProductOperand tensor, int head_size) const override {
    return inner_->keeps_as_bf16(tensor, head_size);
  }
  void store_as_bf16(const float* tensor, size_t count) override {
    inner_->store_as_bf16(tensor, count);
  }
  // No step capture: a recorded step cannot be timed op by op.

 private:
  // Runs `op` on the inner backend, waits for it, and books the time under `kind`.
  template <typename Op>
  void timed(const char* kind, double flops, Op&& op) {
    const auto start = std::chrono::steady_clock::now();
    op();
    inner_->synchronize();
    OpTime& entry = times_[kind];
    entry.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    entry.flops += flops;
    ++entry.calls;
  }

  std::unique_ptr<Backend> inner_;
  std::map<std::string, OpTime> times_;
};

}  // namespace folio
