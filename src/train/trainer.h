// The training loop of the seeds: every eval_interval steps (and at the last) estimate the loss
// on both splits, print it, checkpoint when val improves; otherwise draw a batch, forward,
// backward, AdamW step. Samples before and after training, as seed 003 prints them.
#pragma once

#include <string>

#include "backend/backend.h"
#include "config/config.h"
#include "data/text_dataset.h"

namespace folio {

struct TrainResult {
  int steps = 0;
  double best_val_loss = -1;
  double last_train_loss = -1, last_val_loss = -1;
  double seconds = 0;
};

// `initial_parameters`, when given a checkpoint path, starts from its weights (the file's
// structure must match config) instead of a fresh initialisation.
TrainResult train(const Config& config, const TextDataset& data, Backend& backend,
                  const std::string& initial_parameters = "");

}  // namespace folio
