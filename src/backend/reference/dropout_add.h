// Reference residual branch: out = residual + dropout(branch), or dropout(branch) when residual
// is null.
#pragma once

#include <cstddef>

#include "core/dropout_mask.h"

namespace folio::reference {

template <typename T>
void dropout_add_forward(T* out, const T* residual, const T* branch, int B, size_t per_sample,
                         const DropoutSpec& dropout) {
  for (int b = 0; b < B; ++b)
    for (size_t e = 0; e < per_sample; ++e) {
      const size_t i = b * per_sample + e;
      T value = branch[i];
      if (dropout.active()) value = dropout.keeps(b, e) ? value * T(dropout.scale()) : T(0);
      out[i] = (residual ? residual[i] : T(0)) + value;
    }
}

template <typename T>
void dropout_add_backward(T* dbranch, const T* dout, int B, size_t per_sample,
                          const DropoutSpec& dropout) {
  for (int b = 0; b < B; ++b)
    for (size_t e = 0; e < per_sample; ++e) {
      const size_t i = b * per_sample + e;
      dbranch[i] = dropout.active() ? (dropout.keeps(b, e) ? dout[i] * T(dropout.scale()) : T(0))
                                    : dout[i];
    }
}

}  // namespace folio::reference
