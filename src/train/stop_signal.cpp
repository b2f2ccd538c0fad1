#include "train/stop_signal.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

#include "distributed/waiting_for_peers.h"

namespace folio {

namespace {

std::atomic<int> signals_seen{0};
// What the second signal's message names (written outside the handler, read inside it).
char run_folder[4096] = ".";
std::atomic<int64_t> state_saved_at{-1}, checkpoint_saved_at{-1};

void write_text(const char* text) {
  write_signal_safe(text);
}
void write_number(int64_t value) {
  write_signal_safe(static_cast<long long>(value));
}

// The second signal: no time to save, so say what the disk holds.
void say_what_is_saved() {
  const int64_t state = state_saved_at.load(), checkpoint = checkpoint_saved_at.load();
  write_text("\nfolio: stopped at once by a second signal: the steps since the last save are lost");
  if (state < 0 && checkpoint < 0) {
    write_text("; this run saved nothing (no training state, no checkpoint)\n");
    return;
  }
  if (state >= 0) {
    write_text("; the training state after step ");
    write_number(state);
    write_text(" is in ");
    write_text(run_folder);
    write_text("/state.safetensors (continue with `folio train --resume ");
    write_text(run_folder);
    write_text("`)");
  } else {
    write_text("; no training state was saved, so the run cannot be resumed");
  }
  if (checkpoint >= 0) {
    write_text("; the best model, of step ");
    write_number(checkpoint);
    write_text(", is in ");
    write_text(run_folder);
    write_text("/ckpt.safetensors");
  }
  write_text("\n");
}

void on_stop_signal(int signal_number) {
  if (signals_seen.fetch_add(1) == 0) {
    write_text(
        "\nfolio: stopping after the current step to save the training state "
        "(signal again to stop at once)\n");
    // Blocked on the other ranks: if one of them died, the launcher is stopping the job and
    // this is the last chance to say so.
    if (const char* what = collective_being_waited_for()) {
      write_text("folio: rank ");
      if (rank_for_messages() >= 0)
        write_number(rank_for_messages());
      else
        write_text("?");
      write_text(": the signal came while waiting for the other ranks in ");
      write_text(what);
      write_text(" (if a rank died, the launcher is stopping the job)\n");
    }
    return;
  }
  if (rank_for_messages() <= 0) say_what_is_saved();
  ::_exit(128 + signal_number);
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
