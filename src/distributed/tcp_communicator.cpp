#include "distributed/tcp_communicator.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "distributed/waiting_for_peers.h"

namespace folio {

namespace {

constexpr uint32_t kHelloMagic = 0x466f6c69;  // "Foli"

// What a rank tells rank 0 when it joins.
struct Hello {
  uint32_t magic;
  int32_t rank;
  int32_t world_size;
  uint16_t ring_port;
};

// Where a rank's ring listener is, as rank 0 saw it.
struct RingAddress {
  uint32_t ipv4;  // network byte order; 0 means "the master address"
  uint16_t port;
};

std::string errno_text() { return std::strerror(errno); }

int milliseconds_until(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left.count(), 1000000)));
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// A listening socket on `port` (0: any free port); returns the fd and the port it got.
int listen_on(uint16_t port, uint16_t* bound_port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error("cannot create a socket: " + errno_text());
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    throw Error("cannot listen on port " + std::to_string(port) + ": " + why +
                " (is another job using MASTER_PORT? pick another)");
  }
  ::listen(fd, 128);
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  *bound_port = ntohs(address.sin_port);
  return fd;
}

// Waits for one connection on `listener` until the deadline.
int accept_before(int listener, std::chrono::steady_clock::time_point deadline,
                  const std::string& waiting_for, sockaddr_in* peer) {
  pollfd p{listener, POLLIN, 0};
  while (true) {
    const int ready = ::poll(&p, 1, milliseconds_until(deadline));
    if (ready > 0) break;
    if (ready == 0) throw Error("timed out waiting for " + waiting_for + " to connect");
    if (errno != EINTR) throw Error("waiting for connections failed: " + errno_text());
  }
  socklen_t length = sizeof(*peer);
  const int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(peer), &length, SOCK_CLOEXEC);
  if (fd < 0) throw Error("accepting a connection failed: " + errno_text());
  set_nodelay(fd);
  return fd;
}

uint32_t resolve_ipv4(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0 || result == nullptr)
    throw Error("cannot resolve MASTER_ADDR '" + host + "'");
  const uint32_t ip = reinterpret_cast<sockaddr_in*>(result->ai_addr)->sin_addr.s_addr;
  ::freeaddrinfo(result);
  return ip;
}

// Connects to ip:port, retrying until the deadline (the listener may not be up yet).
int connect_before(uint32_t ipv4, uint16_t port, std::chrono::steady_clock::time_point deadline,
                   const std::string& to_whom) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = ipv4;
  address.sin_port = htons(port);
  std::string last_error;
  while (std::chrono::steady_clock::now() < deadline) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw Error("cannot create a socket: " + errno_text());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
      set_nodelay(fd);
      return fd;
    }
    last_error = errno_text();
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  char text[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &address.sin_addr, text, sizeof(text));
  throw Error("cannot connect to " + to_whom + " at " + text + ":" + std::to_string(port) +
              " (" + last_error + "); is it running, and MASTER_ADDR/MASTER_PORT right?");
}

}  // namespace

PeerSocket& PeerSocket::operator=(PeerSocket&& other) noexcept {
  if (this != &other) {
    if (fd >= 0) ::close(fd);
    fd = other.fd;
    peer_rank = other.peer_rank;
    other.fd = -1;
  }
  return *this;
}

PeerSocket::~PeerSocket() {
  if (fd >= 0) ::close(fd);
}

TcpCommunicator::Clock::time_point TcpCommunicator::deadline() const {
  return Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds_ * 1000));
}

TcpCommunicator::TcpCommunicator(const LaunchEnvironment& env, double timeout_seconds)
    : Communicator(env.rank, env.world_size, env.local_rank), timeout_seconds_(timeout_seconds) {
  const int W = world_size(), r = rank();
  if (W == 1) return;
  const auto until = deadline();
  uint16_t ring_port = 0;
  const int ring_listener = listen_on(0, &ring_port);
  PeerSocket ring_listener_owner(ring_listener, -1);
  const uint32_t master_ip = resolve_ipv4(env.master_address);

  // 1. The star: everyone meets rank 0 and learns where the others' ring listeners are.
  std::vector<RingAddress> table(W);
  if (r == 0) {
    uint16_t master_port = 0;
    PeerSocket master(listen_on(static_cast<uint16_t>(env.master_port), &master_port), -1);
    star_.resize(W);
    table[0] = {0, ring_port};
    for (int joined = 1; joined < W; ++joined) {
      sockaddr_in peer{};
      const int fd = accept_before(master.fd, until,
                                   std::to_string(W - joined) + " more rank(s) of " +
                                       std::to_string(W),
                                   &peer);
      PeerSocket socket(fd, -1);
      Hello hello{};
      receive_all(socket, &hello, sizeof(hello), "the rendezvous");
      if (hello.magic != kHelloMagic || hello.rank <= 0 || hello.rank >= W ||
          hello.world_size != W || star_[hello.rank].fd >= 0)
        throw Error("rendezvous: a process joined with rank " + std::to_string(hello.rank) +
                    " of " + std::to_string(hello.world_size) + ", but this job has " +
                    std::to_string(W) + " ranks (duplicate or stale process?)");
      socket.peer_rank = hello.rank;
      table[hello.rank] = {peer.sin_addr.s_addr, hello.ring_port};
      star_[hello.rank] = std::move(socket);
    }
    for (int peer = 1; peer < W; ++peer)
      send_all(star_[peer], table.data(), table.size() * sizeof(RingAddress), "the rendezvous");
  } else {
    star_.emplace_back(connect_before(master_ip, static_cast<uint16_t>(env.master_port), until,
                                      "rank 0"),
                       0);
    const Hello hello{kHelloMagic, r, W, ring_port};
    send_all(star_[0], &hello, sizeof(hello), "the rendezvous");
    receive_all(star_[0], table.data(), table.size() * sizeof(RingAddress), "the rendezvous");
  }

  // 2. The ring: connect to the next rank (its listener's backlog takes us before it accepts),
  // then accept the previous one.
  const int next = (r + 1) % W, previous = (r + W - 1) % W;
  const uint32_t next_ip = table[next].ipv4 == 0 ? master_ip : table[next].ipv4;
  next_ = PeerSocket(connect_before(next_ip, table[next].port, until,
                                    "rank " + std::to_string(next)),
                     next);
  const int32_t my_rank = r;
  send_all(next_, &my_rank, sizeof(my_rank), "the ring set-up");
  sockaddr_in peer{};
  previous_ = PeerSocket(
      accept_before(ring_listener, until, "rank " + std::to_string(previous), &peer), previous);
  int32_t their_rank = -1;
  receive_all(previous_, &their_rank, sizeof(their_rank), "the ring set-up");
  if (their_rank != previous)
    throw Error("ring set-up: expected rank " + std::to_string(previous) + ", got " +
                std::to_string(their_rank));
  set_nonblocking(next_.fd);
  set_nonblocking(previous_.fd);
  for (PeerSocket& socket : star_)
    if (socket.fd >= 0) set_nonblocking(socket.fd);
}

Error TcpCommunicator::peer_error(int peer, const char* what, const std::string& how) const {
  return Error("rank " + std::to_string(rank()) + ": " + how + " rank " + std::to_string(peer) +
               " during " + what + " (did it exit, die or hang?)");
}

Error TcpCommunicator::timeout_error(int peer, const char* what) const {
  return peer_error(peer, what,
                    "waited " + std::to_string(static_cast<int>(timeout_seconds_)) +
                        " s (dist_timeout) for") ;
}

void TcpCommunicator::send_all(PeerSocket& socket, const void* data, size_t bytes,
                               const char* what) {
  const WaitingForPeers waiting(what);
  const auto until = deadline();
  const char* cursor = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t sent = ::send(socket.fd, cursor, bytes, MSG_NOSIGNAL);
    if (sent > 0) {
      cursor += sent;
      bytes -= static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      throw peer_error(socket.peer_rank, what, "lost the connection (" + errno_text() + ") to");
    pollfd p{socket.fd, POLLOUT, 0};
    if (::poll(&p, 1, milliseconds_until(until)) == 0) throw timeout_error(socket.peer_rank, what);
  }
}

void TcpCommunicator::receive_all(PeerSocket& socket, void* data, size_t bytes,
                                  const char* what) {
  const WaitingForPeers waiting(what);
  const auto until = deadline();
  char* cursor = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t got = ::recv(socket.fd, cursor, bytes, 0);
    if (got > 0) {
      cursor += got;
      bytes -= static_cast<size_t>(got);
      continue;
    }
    if (got == 0) throw peer_error(socket.peer_rank, what, "the connection was closed by");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      throw peer_error(socket.peer_rank, what, "lost the connection (" + errno_text() + ") to");
    pollfd p{socket.fd, POLLIN, 0};
    if (::poll(&p, 1, milliseconds_until(until)) == 0) throw timeout_error(socket.peer_rank, what);
  }
}

void TcpCommunicator::ring_exchange(const void* send, size_t send_bytes, void* receive,
                                    size_t receive_bytes, const char* what) {
  const WaitingForPeers waiting(what);
  const auto until = deadline();
  const char* out = static_cast<const char*>(send);
  char* in = static_cast<char*>(receive);
  while (send_bytes > 0 || receive_bytes > 0) {
    pollfd p[2] = {{next_.fd, static_cast<short>(send_bytes ? POLLOUT : 0), 0},
                   {previous_.fd, static_cast<short>(receive_bytes ? POLLIN : 0), 0}};
    const int ready = ::poll(p, 2, milliseconds_until(until));
    if (ready == 0)
      throw timeout_error(receive_bytes ? previous_.peer_rank : next_.peer_rank, what);
    if (ready < 0 && errno != EINTR) throw Error(std::string("poll failed: ") + errno_text());
    if (send_bytes && (p[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t sent = ::send(next_.fd, out, send_bytes, MSG_NOSIGNAL);
      if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        throw peer_error(next_.peer_rank, what, "lost the connection (" + errno_text() + ") to");
      if (sent > 0) out += sent, send_bytes -= static_cast<size_t>(sent);
    }
    if (receive_bytes && (p[1].revents & (POLLIN | POLLERR | POLLHUP))) {
      const ssize_t got = ::recv(previous_.fd, in, receive_bytes, 0);
      if (got == 0) throw peer_error(previous_.peer_rank, what, "the connection was closed by");
      if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        throw peer_error(previous_.peer_rank, what,
                         "lost the connection (" + errno_text() + ") to");
      if (got > 0) in += got, receive_bytes -= static_cast<size_t>(got);
    }
  }
}

void TcpCommunicator::all_reduce_sum(float* data, size_t n) {
  const int W = world_size(), r = rank();
  if (W == 1 || n == 0) return;
  // Chunk c covers [begin(c), begin(c + 1)).
  auto begin = [&](int c) { return n * static_cast<size_t>(c) / W; };
  size_t largest = 0;
  for (int c = 0; c < W; ++c) largest = std::max(largest, begin(c + 1) - begin(c));
  if (incoming_.size() < largest) incoming_.resize(largest);
  // Reduce-scatter: after W-1 steps rank r holds the full sum of chunk (r + 1) mod W.
  for (int step = 0; step < W - 1; ++step) {
    const int send_chunk = (r - step + W) % W, receive_chunk = (r - step - 1 + 2 * W) % W;
    const size_t send_count = begin(send_chunk + 1) - begin(send_chunk);
    const size_t receive_count = begin(receive_chunk + 1) - begin(receive_chunk);
    ring_exchange(data + begin(send_chunk), send_count * sizeof(float), incoming_.data(),
                  receive_count * sizeof(float), "a gradient all-reduce");
    float* target = data + begin(receive_chunk);
    for (size_t i = 0; i < receive_count; ++i) target[i] += incoming_[i];
  }
  // All-gather: pass the finished chunks round the ring.
  for (int step = 0; step < W - 1; ++step) {
    const int send_chunk = (r + 1 - step + W) % W, receive_chunk = (r - step + W) % W;
    ring_exchange(data + begin(send_chunk),
                  (begin(send_chunk + 1) - begin(send_chunk)) * sizeof(float),
                  data + begin(receive_chunk),
                  (begin(receive_chunk + 1) - begin(receive_chunk)) * sizeof(float),
                  "a gradient all-reduce");
  }
}

void TcpCommunicator::all_reduce_max(int64_t* data, size_t n) {
  const int W = world_size();
  if (W == 1 || n == 0) return;
  if (is_root()) {
    std::vector<int64_t> theirs(n);
    for (int peer = 1; peer < W; ++peer) {
      receive_all(star_[peer], theirs.data(), n * sizeof(int64_t), "a max all-reduce");
      for (size_t i = 0; i < n; ++i) data[i] = std::max(data[i], theirs[i]);
    }
    for (int peer = 1; peer < W; ++peer)
      send_all(star_[peer], data, n * sizeof(int64_t), "a max all-reduce");
  } else {
    send_all(star_[0], data, n * sizeof(int64_t), "a max all-reduce");
    receive_all(star_[0], data, n * sizeof(int64_t), "a max all-reduce");
  }
}

void TcpCommunicator::broadcast(void* data, size_t bytes) {
  if (world_size() == 1 || bytes == 0) return;
  if (is_root()) {
    for (int peer = 1; peer < world_size(); ++peer)
      send_all(star_[peer], data, bytes, "a broadcast from rank 0");
  } else {
    receive_all(star_[0], data, bytes, "a broadcast from rank 0");
  }
}

void TcpCommunicator::all_gather(const void* mine, void* all, size_t bytes) {
  char* table = static_cast<char*>(all);
  if (mine != table + bytes * rank()) std::memmove(table + bytes * rank(), mine, bytes);
  if (world_size() == 1) return;
  if (is_root()) {
    for (int peer = 1; peer < world_size(); ++peer)
      receive_all(star_[peer], table + bytes * peer, bytes, "an all-gather");
  } else {
    send_all(star_[0], table + bytes * rank(), bytes, "an all-gather");
  }
  broadcast(all, bytes * world_size());
}

void TcpCommunicator::barrier() {
  int64_t token = 0;
  all_reduce_max(&token, 1);
}

}  // namespace folio
