// Every op of the inner backend, timed (profiling_backend.h).
#include "backend/profiling_backend.h"

namespace folio {

void ProfilingBackend::copy_to_device(void* device, const void* host, size_t bytes) {
  timed("copies", 0, [&] { inner_->copy_to_device(device, host, bytes); });
}
void ProfilingBackend::copy_to_host(void* host, const void* device, size_t bytes) {
  timed("copies", 0, [&] { inner_->copy_to_host(host, device, bytes); });
}
void ProfilingBackend::copy_device(void* to, const void* from, size_t bytes) {
  timed("copies", 0, [&] { inner_->copy_device(to, from, bytes); });
}
void ProfilingBackend::fill_zero(void* device, size_t bytes) {
  timed("zero gradients", 0, [&] { inner_->fill_zero(device, bytes); });
}

void ProfilingBackend::embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                         const float* wpe, int B, int T, int C,
                                         int first_position) {
  timed("embedding forward", 0,
        [&] { inner_->embedding_forward(out, tokens, wte, wpe, B, T, C, first_position); });
}
void ProfilingBackend::embedding_backward(float* dwte, float* dwpe, const float* dout,
                                          const int32_t* tokens, int B, int T, int C) {
  timed("embedding backward", 0,
        [&] { inner_->embedding_backward(dwte, dwpe, dout, tokens, B, T, C); });
}

void ProfilingBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, int N, int C,
                                         ReadBy out_read_by) {
  timed("layernorm forward", 0, [&] {
    inner_->layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, out_read_by);
  });
}
void ProfilingBackend::layernorm_backward(float* dinp, float* dweight, float* dbias,
                                          const float* dout, const float* inp,
                                          const float* weight, const float* mean,
                                          const float* rstd, int N, int C) {
  timed("layernorm backward", 0, [&] {
    inner_->layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  });
}

void ProfilingBackend::matmul_forward(float* out, const float* inp, const float* weight,
                                      const float* bias, int N, int IC, int OC) {
  timed("matmul forward", 2.0 * N * IC * OC,
        [&] { inner_->matmul_forward(out, inp, weight, bias, N, IC, OC); });
}
void ProfilingBackend::matmul_backward(float* dinp, float* dweight, float* dbias,
                                       const float* dout, const float* inp, const float* weight,
                                       int N, int IC, int OC, GradientUpdate update) {
  timed("matmul backward", (dinp ? 4.0 : 2.0) * N * IC * OC, [&] {
    inner_->matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, IC, OC, update);
  });
}

void ProfilingBackend::attention_forward(float* out, float* saved, const float* qkv, int B,
                                         int T, int H, int head_size, int q_start,
                                         const DropoutSpec& dropout) {
  // q k^T and the weights times v, causal: about half of 2 (2 B H T T hs), as mfu.h counts them
  timed("attention forward", 2.0 * B * H * T * T * head_size, [&] {
    inner_->attention_forward(out, saved, qkv, B, T, H, head_size, q_start, dropout);
  });
}
void ProfilingBackend::attention_backward(float* dqkv, const float* dout, const float* qkv,
                                          const float* saved, int B, int T, int H, int head_size,
                                          const DropoutSpec& dropout, ReadBy dqkv_read_by) {
  timed("attention backward", 4.0 * B * H * T * T * head_size, [&] {
    inner_->attention_backward(dqkv, dout, qkv, saved, B, T, H, head_size, dropout, dqkv_read_by);
  });
}

void ProfilingBackend::activation_forward(float* out, const float* inp, size_t n,
                                          Activation kind, ReadBy read_by) {
  timed("activation forward", 0,
        [&] { inner_->activation_forward(out, inp, n, kind, read_by); });
}
void ProfilingBackend::activation_backward(float* dinp, const float* dout, const float* inp,
                                           size_t n, Activation kind, ReadBy dinp_read_by) {
  timed("activation backward", 0,
        [&] { inner_->activation_backward(dinp, dout, inp, n, kind, dinp_read_by); });
}

void ProfilingBackend::matmul_activation_forward(float* pre, float* out, const float* inp,
                                                 const float* weight, const float* bias, int N,
                                                 int IC, int OC, Activation kind,
                                                 ReadBy out_read_by) {
  timed("matmul+activation forward", 2.0 * N * IC * OC, [&] {
    inner_->matmul_activation_forward(pre, out, inp, weight, bias, N, IC, OC, kind, out_read_by);
  });
}
void ProfilingBackend::matmul_backward_into_activation(float* dpre, float* dweight, float* dbias,
                                                       const float* dout, const float* inp,
                                                       const float* weight, const float* pre,
                                                       int N, int IC, int OC,
                                                       GradientUpdate update, Activation kind,
                                                       ReadBy dpre_read_by) {
  timed("matmul+activation backward", 4.0 * N * IC * OC, [&] {
    inner_->matmul_backward_into_activation(dpre, dweight, dbias, dout, inp, weight, pre, N, IC,
                                            OC, update, kind, dpre_read_by);
  });
}

void ProfilingBackend::dropout_add_forward(float* out, const float* residual, const float* branch,
                                           int B, size_t per_sample, const DropoutSpec& dropout) {
  timed("dropout+residual forward", 0,
        [&] { inner_->dropout_add_forward(out, residual, branch, B, per_sample, dropout); });
}
void ProfilingBackend::dropout_add_backward(float* dbranch, const float* dout, int B,
                                            size_t per_sample, const DropoutSpec& dropout) {
  timed("dropout+residual backward", 0,
        [&] { inner_->dropout_add_backward(dbranch, dout, B, per_sample, dropout); });
}

void ProfilingBackend::cross_entropy_forward(float* losses, const float* logits,
                                             const int32_t* targets, int N, int V, int Vp) {
  timed("cross-entropy forward", 0,
        [&] { inner_->cross_entropy_forward(losses, logits, targets, N, V, Vp); });
}
void ProfilingBackend::cross_entropy_backward(float* dlogits, const float* logits,
                                              const int32_t* targets, int N, int V, int Vp,
                                              float dloss, ReadBy dlogits_read_by) {
  timed("cross-entropy backward", 0, [&] {
    inner_->cross_entropy_backward(dlogits, logits, targets, N, V, Vp, dloss, dlogits_read_by);
  });
}

void ProfilingBackend::adamw_update(float* params, const float* grads, float* m, float* v,
                                    size_t n, const AdamWStep& step) {
  timed("optimizer (AdamW)", 0, [&] { inner_->adamw_update(params, grads, m, v, n, step); });
}
void ProfilingBackend::sum(float* result, const float* x, size_t n) {
  timed("loss and norms", 0, [&] { inner_->sum(result, x, n); });
}
void ProfilingBackend::sum_of_squares(float* result, const float* x, size_t n) {
  timed("loss and norms", 0, [&] { inner_->sum_of_squares(result, x, n); });
}
void ProfilingBackend::scale(float* x, size_t n, float factor) {
  timed("optimizer (clipping)", 0, [&] { inner_->scale(x, n, factor); });
}

void ProfilingBackend::dropout_add_layernorm_forward(float* residual_out, float* ln_out,
                                                     float* mean, float* rstd,
                                                     const float* residual, const float* branch,
                                                     const float* weight, const float* bias,
                                                     int B, size_t per_sample, int C,
                                                     const DropoutSpec& dropout,
                                                     ReadBy ln_out_read_by) {
  timed("dropout+residual+layernorm forward", 0, [&] {
    inner_->dropout_add_layernorm_forward(residual_out, ln_out, mean, rstd, residual, branch,
                                          weight, bias, B, per_sample, C, dropout,
                                          ln_out_read_by);
  });
}
void ProfilingBackend::layernorm_dropout_add_backward(float* dinp, float* dbranch, float* dweight,
                                                      float* dbias, const float* dout,
                                                      const float* inp, const float* weight,
                                                      const float* mean, const float* rstd, int B,
                                                      size_t per_sample, int C,
                                                      const DropoutSpec& dropout) {
  timed("layernorm+dropout+residual backward", 0, [&] {
    inner_->layernorm_dropout_add_backward(dinp, dbranch, dweight, dbias, dout, inp, weight, mean,
                                           rstd, B, per_sample, C, dropout);
  });
}

}  // namespace folio
