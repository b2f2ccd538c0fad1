// Reference causal multi-head attention, the seed's Head.forward for all heads at once:
//   wei = q k^T * hs^-0.5, masked to j <= i, softmax, dropout, times v.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "core/dropout_mask.h"

namespace folio::reference {

template <typename T>
void attention_forward(T* out, T* probs, const T* qkv, int B, int T_, int H, int hs, int q_start,
                       const DropoutSpec& dropout) {
  const int A = H * hs;
  const T scale = T(1) / std::sqrt(T(hs));
  const T keep_scale = dropout.active() ? T(dropout.scale()) : T(1);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = q_start; i < T_; ++i) {
        const T* q = qkv + (static_cast<size_t>(b) * T_ + i) * 3 * A + h * hs;
        T* p = probs + ((static_cast<size_t>(b) * H + h) * T_ + i) * T_;
        T max_score = -std::numeric_limits<T>::infinity();
        for (int j = 0; j <= i; ++j) {
          const T* k = qkv + (static_cast<size_t>(b) * T_ + j) * 3 * A + A + h * hs;
          T score = 0;
          for (int d = 0; d < hs; ++d) score += q[d] * k[d];
          p[j] = score * scale;
          max_score = std::max(max_score, p[j]);
        }
        T total = 0;
        for (int j = 0; j <= i; ++j) total += (p[j] = std::exp(p[j] - max_score));
        for (int j = 0; j <= i; ++j) p[j] /= total;
        for (int j = i + 1; j < T_; ++j) p[j] = 0;

        T* o = out + (static_cast<size_t>(b) * T_ + i) * A + h * hs;
        for (int d = 0; d < hs; ++d) o[d] = 0;
        for (int j = 0; j <= i; ++j) {
          T weight = p[j];
          if (dropout.active())
            weight = dropout.keeps(b, (static_cast<size_t>(h) * T_ + i) * T_ + j) ? weight * keep_scale
                                                                                   : T(0);
          const T* v = qkv + (static_cast<size_t>(b) * T_ + j) * 3 * A + 2 * A + h * hs;
          for (int d = 0; d < hs; ++d) o[d] += weight * v[d];
        }
      }
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* probs, int B, int T_,
                        int H, int hs, const DropoutSpec& dropout) {
  const int A = H * hs;
  const T scale = T(1) / std::sqrt(T(hs));
  const T keep_scale = dropout.active() ? T(dropout.scale()) : T(1);
  std::fill(dqkv, dqkv + static_cast<size_t>(B) * T_ * 3 * A, T(0));
  std::vector<T> dp(T_);
  auto row = [&](int b, int t) { return (static_cast<size_t>(b) * T_ + t) * 3 * A; };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < T_; ++i) {
        const T* p = probs + ((static_cast<size_t>(b) * H + h) * T_ + i) * T_;
        const T* dO = dout + (static_cast<size_t>(b) * T_ + i) * A + h * hs;
        // Through "out = dropout(p) @ v": gradients of the dropped weights and of v.
        for (int j = 0; j <= i; ++j) {
          const bool kept =
              !dropout.active() || dropout.keeps(b, (static_cast<size_t>(h) * T_ + i) * T_ + j);
          const T mask = kept ? keep_scale : T(0);
          const T* v = qkv + row(b, j) + 2 * A + h * hs;
          T* dv = dqkv + row(b, j) + 2 * A + h * hs;
          T dot = 0;
          for (int d = 0; d < hs; ++d) {
            dot += dO[d] * v[d];
            dv[d] += p[j] * mask * dO[d];
          }
          dp[j] = dot * mask;
        }
        // Through the softmax: ds = p * (dp - sum_k p_k dp_k); then through q k^T * scale.
        T p_dot_dp = 0;
        for (int j = 0; j <= i; ++j) p_dot_dp += p[j] * dp[j];
        const T* q = qkv + row(b, i) + h * hs;
        T* dq = dqkv + row(b, i) + h * hs;
        for (int j = 0; j <= i; ++j) {
          const T ds = p[j] * (dp[j] - p_dot_dp) * scale;
          const T* k = qkv + row(b, j) + A + h * hs;
          T* dk = dqkv + row(b, j) + A + h * hs;
          for (int d = 0; d < hs; ++d) {
            dq[d] += ds * k[d];
            dk[d] += ds * q[d];
          }
        }
      }
}

}  // namespace folio::reference
