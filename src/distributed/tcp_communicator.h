// Collectives over plain TCP sockets, for ranks started without MPI: a torchrun-style
// environment, SageMaker, or `folio train --nproc`.
//
// Rendezvous: rank 0 listens at MASTER_ADDR:MASTER_PORT; every other rank connects, says its
// rank and the port of its own ring listener; rank 0 sends back everyone's address. Then each
// rank connects to the next rank of a ring. Small messages (flags, hashes, the initial weights)
// go over the star through rank 0; gradient sums go round the ring (reduce-scatter, then
// all-gather), so each rank sends and receives 2 (W-1)/W of the buffer, and every rank ends with
// the same bits.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/error.h"
#include "distributed/communicator.h"
#include "distributed/launch_environment.h"

namespace folio {

// A connected TCP socket (RAII), with the peer's rank for error messages.
struct PeerSocket {
  int fd = -1;
  int peer_rank = -1;
  PeerSocket() = default;
  PeerSocket(int f, int rank) : fd(f), peer_rank(rank) {}
  PeerSocket(PeerSocket&& other) noexcept : fd(other.fd), peer_rank(other.peer_rank) {
    other.fd = -1;
  }
  PeerSocket& operator=(PeerSocket&& other) noexcept;
  PeerSocket(const PeerSocket&) = delete;
  PeerSocket& operator=(const PeerSocket&) = delete;
  ~PeerSocket();
};

class TcpCommunicator final : public Communicator {
 public:
  TcpCommunicator(const LaunchEnvironment& env, double timeout_seconds);

  std::string name() const override { return "tcp"; }
  void all_reduce_sum(float* data, size_t n) override;
  void all_reduce_max(int64_t* data, size_t n) override;
  void broadcast(void* data, size_t bytes) override;
  void all_gather(const void* mine, void* all, size_t bytes) override;
  void barrier() override;

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point deadline() const;
  // "rank R: <how> rank P during <what>": the one line a rank prints when a peer is gone.
  Error peer_error(int peer, const char* what, const std::string& how) const;
  Error timeout_error(int peer, const char* what) const;
  void send_all(PeerSocket& socket, const void* data, size_t bytes, const char* what);
  void receive_all(PeerSocket& socket, void* data, size_t bytes, const char* what);
  // Sends to the next rank of the ring while receiving from the previous one.
  void ring_exchange(const void* send, size_t send_bytes, void* receive, size_t receive_bytes,
                     const char* what);

  double timeout_seconds_;
  std::vector<PeerSocket> star_;  // rank 0: one per other rank (index = rank); others: [0]
  PeerSocket next_, previous_;    // the ring
  std::vector<float> incoming_;   // one ring chunk
};

}  // namespace folio
