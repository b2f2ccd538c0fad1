// torch.optim.AdamW over the flat parameter buffer, with its two moments in flat buffers of the
// same layout, and torch.nn.utils.clip_grad_norm_ before it (folded into the update: AdamWStep). Weight decay applies to every
// parameter (decay_params=all, torch's default) or to the 2-D tensors only (matrices, nanoGPT),
// which the parameter layout keeps in one leading range.
#pragma once

#include <cstdint>

#include "backend/device_buffer.h"
#include "config/config.h"
#include "model/gpt.h"

namespace folio {

class AdamW {
 public:
  AdamW(GPT& model, const Config& config);

  // Updates the parameters with `learning_rate`, reading the gradients clipped (when
  // grad_clip > 0) by their squared global norm `gradient_squared_norm`, one float of device
  // memory that the caller has summed (TrainingStep does, once per step).
  void step(double learning_rate, const float* gradient_squared_norm);

  int64_t steps_taken() const { return steps_; }
  void set_steps_taken(int64_t steps) { steps_ = steps; }
  float* first_moment() const { return m_.as<float>(); }
  float* second_moment() const { return v_.as<float>(); }

 private:
  GPT& model_;
  Config config_;
  DeviceBuffer m_, v_;
  int64_t steps_ = 0;
};

}  // namespace folio
