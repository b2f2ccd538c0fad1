#include "distributed/waiting_for_peers.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

namespace folio {

namespace {
std::atomic<const char*> waiting_in{nullptr};
std::atomic<int> this_rank{-1};
std::atomic<int> ranks_in_job{0};
static_assert(std::atomic<const char*>::is_always_lock_free, "read from a signal handler");
}  // namespace

WaitingForPeers::WaitingForPeers(const char* what)
    : what_(what), outer_(waiting_in.exchange(what)) {}
WaitingForPeers::~WaitingForPeers() {
  const char* mine = what_;
  waiting_in.compare_exchange_strong(mine, outer_);  // only if the mark is still this one
}
const char* collective_being_waited_for() { return waiting_in.load(); }
void note_rank_for_messages(int rank) { this_rank.store(rank); }
int rank_for_messages() { return this_rank.load(); }

void write_signal_safe(const char* text) {
  size_t length = 0;
  while (text[length] != '\0') ++length;
  [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, text, length);
}

void write_signal_safe(long long number) {
  if (number < 0) {
    write_signal_safe("-");
    number = -number;
  }
  char digits[24];
  int length = 0;
  do digits[length++] = static_cast<char>('0' + number % 10), number /= 10;
  while (number > 0);
  char text[24];
  for (int i = 0; i < length; ++i) text[i] = digits[length - 1 - i];
  text[length] = '\0';
  write_signal_safe(text);
}

namespace {
void on_sigpipe(int) {
  const char* what = collective_being_waited_for();
  if (what == nullptr) {  // not Gloo's: the default action, delivered when this handler returns
    ::signal(SIGPIPE, SIG_DFL);
    ::raise(SIGPIPE);
    return;
  }
  write_signal_safe("folio: error: rank ");
  write_signal_safe(static_cast<long long>(rank_for_messages()));
  const int ranks = ranks_in_job.load();
  if (ranks == 2) {
    write_signal_safe(": the connection was closed by rank ");
    write_signal_safe(static_cast<long long>(1 - rank_for_messages()));
  } else {
    write_signal_safe(
        ": the connection to another rank was closed (a write found it gone; the "
        "launcher's message says which rank)");
  }
  write_signal_safe(" during ");
  write_signal_safe(what);
  write_signal_safe(" (did it exit, die or hang?)\n");
  ::_exit(1);
}
}  // namespace

void end_rank_on_sigpipe_in_collectives(int world_size) {
  ranks_in_job.store(world_size);
  struct sigaction action {};
  action.sa_handler = on_sigpipe;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGPIPE, &action, nullptr);
}

}  // namespace folio
