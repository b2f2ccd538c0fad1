// torch.optim.AdamW over the flat parameter buffer, with its two moments in flat buffers of the
// same layout, and torch.nn.utils.clip_grad_norm_ before it. Weight decay applies to every
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

  // Clips the gradients (when grad_clip > 0), then updates the parameters with `learning_rate`.
  void step(double learning_rate);
  // Global norm of the last step's gradients before clipping (waits for the device); -1 when
  // clipping is off, since the norm is then not computed.
  float last_gradient_norm() const;

  int64_t steps_taken() const { return steps_; }
  void set_steps_taken(int64_t steps) { steps_ = steps; }
  float* first_moment() const { return m_.as<float>(); }
  float* second_moment() const { return v_.as<float>(); }

 private:
  GPT& model_;
  Config config_;
  DeviceBuffer m_, v_, norm_;
  int64_t steps_ = 0;
  bool norm_valid_ = false;
};

}  // namespace folio
