// The training loop of the seeds: every eval_interval steps (and at the last) estimate the loss
// on both splits, print it, checkpoint when val improves; then one training step
// (train/training_step.h: a batch, forward, backward, AdamW). Trainer::run in trainer.cpp reads
// as that loop, each phase a named function below it. Samples before and after training, as seed
// 003 prints them.
//
// Data-parallel over a Communicator: the global batch of a step is world x batch_size x
// grad_accum windows, window g going to the rank and micro-step that own it; gradients are
// summed over the ranks before each step, so every rank applies the same update and N ranks
// compute what one process would. Only rank 0 prints, writes files and samples.
//
// The training state (io/training_state.h) is written every checkpoint_interval steps and at
// exit, so that `--resume` continues a run bit for bit; SIGINT/SIGTERM stop it cleanly.
#pragma once

#include <string>

#include "backend/backend.h"
#include "config/config.h"
#include "data/dataset.h"
#include "distributed/communicator.h"
#include "io/training_state.h"

namespace folio {

struct TrainOptions {
  std::string init_from;                  // start from these weights instead of a fresh init
  const TrainingState* resume = nullptr;  // continue this state
  std::string resume_dir;                 // the folder it came from (out_dir may be another)
  std::string launcher;                   // who started the ranks, for the start-up line
  bool overwrite = false;                 // out_dir may hold another run, to be replaced
  bool quiet = false;                     // no live progress (evaluations still print)
};

struct TrainResult {
  int64_t steps_done = 0;
  double best_val_loss = -1;
  double last_train_loss = -1, last_val_loss = -1;
  double seconds = 0;
  bool interrupted = false;  // stopped by a signal; the state was saved
};

TrainResult train(const Config& config, const Dataset& data, Backend& backend,
                  Communicator& communicator, const TrainOptions& options);

}  // namespace folio
