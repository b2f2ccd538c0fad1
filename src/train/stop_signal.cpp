#include "train/stop_signal.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

#include "core/signal_thread.h"
#include "distributed/waiting_for_peers.h"

namespace folio {

namespace {

std::atomic<int> signals_seen{0};
// What the second signal's message names (written outside the handler, read inside it).
char run_folder[4096] = ".";
std::atomic<int64_t> state_saved_at{-1}, checkpoint_saved_at{-1};

// The second signal: no time to save, so say what the disk holds.
void say_what_is_saved() {
  const int64_t state = state_saved_at.load(), checkpoint = checkpoint_saved_at.load();
  write_signal_safe(
      "\nfolio: stopped at once by a second signal: the steps since the last save are lost");
  if (state < 0 && checkpoint < 0) {
    write_signal_safe("; this run saved nothing (no training state, no checkpoint)\n");
    return;
  }
  if (state >= 0) {
    write_signal_safe("; the training state after step ");
    write_signal_safe(state);
    write_signal_safe(" is in ");
    write_signal_safe(run_folder);
    write_signal_safe("/state.safetensors (continue with `folio train --resume ");
    write_signal_safe(run_folder);
    write_signal_safe("`)");
  } else {
    write_signal_safe("; no training state was saved, so the run cannot be resumed");
  }
  if (checkpoint >= 0) {
    write_signal_safe("; the best model, of step ");
    write_signal_safe(checkpoint);
    write_signal_safe(", is in ");
    write_signal_safe(run_folder);
    write_signal_safe("/ckpt.safetensors");
  }
  write_signal_safe("\n");
}

void on_stop_signal(int signal_number) {
  if (signals_seen.fetch_add(1) == 0) {
    write_signal_safe(
        "\nfolio: stopping after the current step to save the training state "
        "(signal again to stop at once)\n");
    // Blocked on the other ranks: if one of them died, the launcher is stopping the job and
    // this is the last chance to say so.
    if (const char* what = collective_being_waited_for()) {
      write_signal_safe("folio: rank ");
      if (rank_for_messages() >= 0)
        write_signal_safe(rank_for_messages());
      else
        write_signal_safe("?");
      write_signal_safe(": the signal came while waiting for the other ranks in ");
      write_signal_safe(what);
      write_signal_safe(" (if a rank died, the launcher is stopping the job)\n");
    }
    return;
  }
  if (rank_for_messages() <= 0) say_what_is_saved();
  ::_exit(128 + signal_number);
}

// However many times it comes (core/signal_thread.h), the launcher's death is one request to stop
// after the step; after a signal it adds nothing. Every rank is told, so rank 0 says it.
void on_launcher_gone(int) {
  int none = 0;
  if (!signals_seen.compare_exchange_strong(none, 1) || rank_for_messages() > 0) return;
  write_signal_safe(
      "\nfolio: the launcher (folio train --nproc) is gone: stopping after the current step to "
      "save the training state\n");
}

}  // namespace

void install_stop_handlers(const std::string& out_dir) {
  if (out_dir.size() < sizeof(run_folder)) {
    out_dir.copy(run_folder, out_dir.size());
    run_folder[out_dir.size()] = '\0';
  }
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  action.sa_handler = on_launcher_gone;
  sigaction(kLauncherGoneSignal, &action, nullptr);
}

bool stop_requested() {
  return signals_seen.load() > 0;
}

void note_state_saved(int64_t steps_done) {
  state_saved_at.store(steps_done);
}

void note_checkpoint_saved(int64_t step) {
  checkpoint_saved_at.store(step);
}

}  // namespace folio
