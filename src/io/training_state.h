// The training state beside the model checkpoint, for `folio train --resume DIR`: everything a
// run needs to continue exactly as if it had never stopped. Batches, dropout masks and samples
// are keyed by (seed, step), so the step is the whole of the random state; the parameters, the
// AdamW moments and the best val loss so far are the rest.
//
// out_dir/state.safetensors: tensors "parameters", "adam_m", "adam_v" (flat fp32, in the
// ParameterLayout order), metadata with the config, tokenizer, data identity, step counters
// and losses. Written atomically (temporary file, fsync, rename) with a checksum verified on load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "tokenizer/tokenizer.h"

namespace folio {

struct TrainingState {
  Config config;
  Tokenizer tokenizer;
  std::string data_sha256;       // the data's identity (data/dataset.h)
  int64_t steps_done = 0;        // the next step to run
  int64_t optimizer_steps = 0;   // AdamW's bias-correction counter
  double best_val_loss = 0;      // +infinity before the first evaluation
  double elapsed_seconds = 0;    // training time of all earlier sessions
  // The ranks that trained it: they set the global batch (ranks x batch_size x grad_accum), so a
  // resume must keep them. 0: unknown (a state written before it was recorded).
  int world_size = 0;
  std::vector<float> parameters, first_moment, second_moment;
};

std::string training_state_path(const std::string& out_dir);

void save_training_state(const std::string& path, const TrainingState& state);
// Throws folio::Error naming the file and the problem (missing, damaged, inconsistent).
TrainingState load_training_state(const std::string& path);

}  // namespace folio
