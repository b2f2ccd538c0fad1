#include "optim/lr_schedule.h"

#include <cmath>

namespace folio {

double learning_rate_at(const Config& c, int step) {
  if (c.lr_schedule != "cosine") return c.learning_rate;
  if (step < c.warmup_iters) return c.learning_rate * (step + 1) / (c.warmup_iters + 1);
  if (step > c.lr_decay_iters) return c.min_lr;
  const double ratio =
      static_cast<double>(step - c.warmup_iters) / (c.lr_decay_iters - c.warmup_iters);
  const double coefficient = 0.5 * (1.0 + std::cos(M_PI * ratio));
  return c.min_lr + coefficient * (c.learning_rate - c.min_lr);
}

}  // namespace folio
