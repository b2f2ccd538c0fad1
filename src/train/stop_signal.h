// SIGINT and SIGTERM (Ctrl-C, a scheduler's preemption notice): the first asks the trainer to
// finish the current step, save the training state and exit 0 with a line saying how to resume;
// a second one exits at once.
#pragma once

namespace folio {

void install_stop_handlers();
bool stop_requested();

}  // namespace folio
