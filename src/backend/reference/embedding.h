// Reference token + position embedding: the plain loops every backend is tested against.
#pragma once

#include <cstdint>

namespace folio::reference {

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int T_,
                       int C, int first_position) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T_; ++t) {
      const T* token_row = wte + static_cast<size_t>(tokens[b * T_ + t]) * C;
      const T* position_row = wpe + static_cast<size_t>(first_position + t) * C;
      T* out_row = out + (static_cast<size_t>(b) * T_ + t) * C;
      for (int c = 0; c < C; ++c) out_row[c] = token_row[c] + position_row[c];
    }
}

template <typename T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int B, int T_,
                        int C) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T_; ++t) {
      const T* dout_row = dout + (static_cast<size_t>(b) * T_ + t) * C;
      T* token_row = dwte + static_cast<size_t>(tokens[b * T_ + t]) * C;
      T* position_row = dwpe + static_cast<size_t>(t) * C;
      for (int c = 0; c < C; ++c) {
        token_row[c] += dout_row[c];
        position_row[c] += dout_row[c];
      }
    }
}

}  // namespace folio::reference
