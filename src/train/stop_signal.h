// SIGINT and SIGTERM (Ctrl-C, a scheduler's preemption notice): the first asks the trainer to
// finish the current step, save the training state and exit 0 with a line saying how to resume;
// a second one exits at once (status 128 + the signal: 130 for Ctrl-C), saying what is saved
// and what is not. A rank of `folio train --nproc` whose launcher dies stops as at a first signal
// (core/signal_thread.h: kLauncherGoneSignal), however often it is told.
#pragma once

#include <cstdint>
#include <string>

namespace folio {

// `out_dir` is where the run saves, named in the second signal's message.
void install_stop_handlers(const std::string& out_dir);
bool stop_requested();
// What is on disk, for the second signal's message: the training state saved after
// `steps_done` steps, the best model checkpoint saved at `step`.
void note_state_saved(int64_t steps_done);
void note_checkpoint_saved(int64_t step);

}  // namespace folio
