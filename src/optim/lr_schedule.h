// Learning rate at a step: constant (the seed), or nanoGPT's linear warm-up then cosine decay:
//   step < warmup:          lr * (step + 1) / (warmup + 1)
//   step > lr_decay_iters:  min_lr
//   otherwise:              min_lr + 0.5 (1 + cos(pi r)) (lr - min_lr),
//                           r = (step - warmup) / (lr_decay_iters - warmup)
#pragma once

#include "config/config.h"

namespace folio {

double learning_rate_at(const Config& config, int step);

}  // namespace folio
