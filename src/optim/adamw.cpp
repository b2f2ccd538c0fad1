#include "optim/adamw.h"

#include <cmath>

namespace folio {

AdamW::AdamW(GPT& model, const Config& config)
    : model_(model), config_(config),
      m_(model.backend(), model.parameter_count() * sizeof(float)),
      v_(model.backend(), model.parameter_count() * sizeof(float)),
      norm_(model.backend(), sizeof(float)) {
  model.backend().fill_zero(m_.get(), m_.bytes());
  model.backend().fill_zero(v_.get(), v_.bytes());
}

void AdamW::step(double learning_rate) {
  Backend& backend = model_.backend();
  const size_t n = model_.parameter_count();
  float* grads = model_.gradients();
  norm_valid_ = false;
  if (config_.grad_clip > 0) {
    backend.sum_of_squares(norm_.as<float>(), grads, n);
    backend.clip_by_norm(grads, n, norm_.as<float>(), static_cast<float>(config_.grad_clip));
    norm_valid_ = true;
  }
  ++steps_;
  AdamWStep update{learning_rate, config_.beta1, config_.beta2, config_.adam_eps,
                   config_.weight_decay, steps_};
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

float AdamW::last_gradient_norm() const {
  if (!norm_valid_) return -1.0f;
  float squared = 0.0f;
  model_.backend().copy_to_host(&squared, norm_.get(), sizeof(float));
  return std::sqrt(squared);
}

}  // namespace folio
