// Reference linear layer: out = inp @ weight^T + bias, weight (OC, IC) as torch.nn.Linear.
#pragma once

#include <cstddef>

namespace folio::reference {

template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int IC, int OC) {
  for (int i = 0; i < N; ++i)
    for (int o = 0; o < OC; ++o) {
      T sum = bias ? bias[o] : T(0);
      for (int k = 0; k < IC; ++k)
        sum += inp[static_cast<size_t>(i) * IC + k] * weight[static_cast<size_t>(o) * IC + k];
      out[static_cast<size_t>(i) * OC + o] = sum;
    }
}

template <typename T>
void matmul_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                     int N, int IC, int OC) {
  if (dinp)
    for (int i = 0; i < N; ++i)
      for (int k = 0; k < IC; ++k) {
        T sum = 0;
        for (int o = 0; o < OC; ++o)
          sum += dout[static_cast<size_t>(i) * OC + o] * weight[static_cast<size_t>(o) * IC + k];
        dinp[static_cast<size_t>(i) * IC + k] = sum;
      }
  for (int o = 0; o < OC; ++o) {
    for (int k = 0; k < IC; ++k) {
      T sum = 0;
      for (int i = 0; i < N; ++i)
        sum += dout[static_cast<size_t>(i) * OC + o] * inp[static_cast<size_t>(i) * IC + k];
      dweight[static_cast<size_t>(o) * IC + k] += sum;
    }
    if (dbias) {
      T sum = 0;
      for (int i = 0; i < N; ++i) sum += dout[static_cast<size_t>(i) * OC + o];
      dbias[o] += sum;
    }
  }
}

}  // namespace folio::reference
