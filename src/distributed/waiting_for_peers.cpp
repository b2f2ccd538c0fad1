#include "distributed/waiting_for_peers.h"

#include <atomic>

namespace folio {

namespace {
std::atomic<const char*> waiting_in{nullptr};
std::atomic<int> this_rank{-1};
static_assert(std::atomic<const char*>::is_always_lock_free, "read from a signal handler");
}  // namespace

WaitingForPeers::WaitingForPeers(const char* what) { waiting_in.store(what); }
WaitingForPeers::~WaitingForPeers() { waiting_in.store(nullptr); }
const char* collective_being_waited_for() { return waiting_in.load(); }
void note_rank_for_messages(int rank) { this_rank.store(rank); }
int rank_for_messages() { return this_rank.load(); }

}  // namespace folio
