#include "optim/adamw.h"

#include <cmath>

#include "core/error.h"

namespace folio {

AdamW::AdamW(GPT& model, const Config& config)
    : model_(model), config_(config),
      m_(model.backend(), model.parameter_count() * sizeof(float)),
      v_(model.backend(), model.parameter_count() * sizeof(float)) {
  model.backend().fill_zero(m_.get(), m_.bytes());
  model.backend().fill_zero(v_.get(), v_.bytes());
}

void AdamW::step(double learning_rate, const float* gradient_squared_norm) {
  Backend& backend = model_.backend();
  const size_t n = model_.parameter_count();
  float* grads = model_.gradients();
  ++steps_;
  AdamWStep update{learning_rate, config_.beta1, config_.beta2, config_.adam_eps,
                   config_.weight_decay, steps_};
  if (config_.grad_clip > 0) {
    if (gradient_squared_norm == nullptr)
      throw Error("internal: clipping needs the gradients' squared norm");
    update.clip_squared_norm = gradient_squared_norm;
    update.clip_max_norm = static_cast<float>(config_.grad_clip);
  }
  float* params = model_.parameters();
  if (config_.decay_params == "all") {
    backend.adamw_update(params, grads, first_moment(), second_moment(), n, update);
  } else {
    const size_t matrices = model_.layout().matrix_total();
    backend.adamw_update(params, grads, first_moment(), second_moment(), matrices, update);
    update.weight_decay = 0.0;
    backend.adamw_update(params + matrices, grads + matrices, first_moment() + matrices,
                         second_moment() + matrices, n - matrices, update);
  }
}

}  // namespace folio
