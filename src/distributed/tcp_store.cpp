#include "distributed/tcp_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "core/error.h"
#include "distributed/communicator.h"
#include "distributed/waiting_for_peers.h"

namespace folio {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kLargestField = 1 << 20;  // keys and values are addresses: far smaller

std::string errno_text() {
  return std::strerror(errno);
}

int milliseconds_until(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left, 1000000)));
}

// Connects `fd` to `address` before the deadline; false when refused or too late. Without a
// deadline of its own, connect to a listener whose backlog is full (it drops the SYNs) waited for
// the kernel's SYN retries, about 127 s, whatever dist_timeout said.
bool connect_before(int fd, const sockaddr_in& address, Clock::time_point deadline) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return false;
  bool connected = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
  if (!connected && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int error = 0;
    socklen_t length = sizeof(error);
    connected = ::poll(&p, 1, milliseconds_until(deadline)) == 1 &&
                ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
  }
  return ::fcntl(fd, F_SETFL, flags) == 0 && connected;
}

// Sends or receives exactly `bytes` before the deadline; false when the peer closed the
// connection or the deadline passed.
bool send_all(int fd, const void* data, size_t bytes, Clock::time_point deadline) {
  const char* cursor = static_cast<const char*>(data);
  while (bytes > 0) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, milliseconds_until(deadline)) <= 0) return false;
    const ssize_t sent = ::send(fd, cursor, bytes, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    cursor += sent;
    bytes -= static_cast<size_t>(sent);
  }
  return true;
}

bool receive_all(int fd, void* data, size_t bytes, Clock::time_point deadline) {
  char* cursor = static_cast<char*>(data);
  while (bytes > 0) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, milliseconds_until(deadline)) <= 0) return false;
    const ssize_t got = ::recv(fd, cursor, bytes, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    cursor += got;
    bytes -= static_cast<size_t>(got);
  }
  return true;
}

void append_field(std::vector<char>& message, const void* data, uint32_t size) {
  const char* length = reinterpret_cast<const char*>(&size);
  message.insert(message.end(), length, length + sizeof(size));
  message.insert(message.end(), static_cast<const char*>(data),
                 static_cast<const char*>(data) + size);
}

}  // namespace

// Rank 0's side: one thread, one poll loop over the listener and the clients.
class TcpStoreServer {
 public:
  explicit TcpStoreServer(int port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener_ < 0) throw Error("cannot create a socket: " + errno_text());
    const int one = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(listener_, 1024) != 0) {
      const std::string why = errno_text();
      ::close(listener_);
      throw Error("rank 0 cannot serve the rendezvous on port " + std::to_string(port) + ": " +
                  why + " (is another job using MASTER_PORT? pick another)");
    }
    if (::pipe2(wake_, O_CLOEXEC) != 0) {
      ::close(listener_);
      throw Error("cannot create a pipe: " + errno_text());
    }
    thread_ = std::thread([this] { serve(); });
  }

  ~TcpStoreServer() {
    const char stop = 1;
    [[maybe_unused]] const ssize_t written = ::write(wake_[1], &stop, 1);  // ends the loop
    thread_.join();
    for (const Client& client : clients_) ::close(client.fd);
    ::close(listener_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }

 private:
  struct Client {
    int fd;
    std::vector<char> pending;  // bytes of requests not yet answered
    int rank = -1;              // once it joined
  };

  void serve() {
    for (;;) {
      std::vector<pollfd> watched = {{wake_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
      for (const Client& client : clients_) watched.push_back({client.fd, POLLIN, 0});
      if (::poll(watched.data(), watched.size(), -1) < 0 && errno != EINTR) return;
      if (watched[0].revents != 0) return;
      if (watched[1].revents & POLLIN) {
        const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) clients_.push_back({fd, {}, -1});
      }
      for (size_t i = 2; i < watched.size(); ++i) {
        if (watched[i].revents == 0) continue;
        Client& client = clients_[i - 2];
        char buffer[65536];
        const ssize_t got = ::recv(client.fd, buffer, sizeof(buffer), 0);
        if (got > 0) client.pending.insert(client.pending.end(), buffer, buffer + got);
        if (got == 0 || (got < 0 && errno != EINTR) || !answer(client)) {
          ::close(client.fd);
          client.fd = -1;
          if (client.rank >= 0) gone_.insert(client.rank);
        }
      }
      std::erase_if(clients_, [](const Client& client) { return client.fd < 0; });
    }
  }

  // Answers the complete requests in client.pending; false when the client must be dropped (a
  // malformed request, or it went away).
  bool answer(Client& client) {
    for (;;) {
      std::vector<char>& bytes = client.pending;
      size_t at = 1;
      std::string fields[2];
      for (std::string& field : fields) {
        uint32_t size = 0;
        if (bytes.size() < at + sizeof(size)) return true;  // incomplete: wait for more
        std::memcpy(&size, bytes.data() + at, sizeof(size));
        if (size > kLargestField) return false;
        at += sizeof(size);
        if (bytes.size() < at + size) return true;
        field.assign(bytes.data() + at, size);
        at += size;
      }
      const uint8_t op = static_cast<uint8_t>(bytes[0]);
      bytes.erase(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(at));
      const std::string& key = fields[0];
      uint8_t found = 0;
      std::string reply;
      const auto existing = values_.find(key);
      if (op == 1) {  // set
        values_[key] = fields[1];
        found = 1;
      } else if (op == 2) {  // get
        if (existing != values_.end()) found = 1, reply = existing->second;
      } else if (op == 3) {  // join
        const int rank = std::atoi(key.c_str());
        if (client.rank < 0 && joined_.insert(rank).second) client.rank = rank, found = 1;
      } else if (op == 4) {  // gone
        for (int rank : gone_) {
          if (!reply.empty()) reply += ',';
          reply += std::to_string(rank);
        }
        found = 1;
      } else {
        return false;
      }
      std::vector<char> message = {static_cast<char>(found)};
      append_field(message, reply.data(), static_cast<uint32_t>(reply.size()));
      if (!send_all(client.fd, message.data(), message.size(),
                    Clock::now() + std::chrono::seconds(10)))
        return false;
    }
  }

  int listener_ = -1;
  int wake_[2] = {-1, -1};
  std::vector<Client> clients_;
  std::map<std::string, std::string> values_;
  std::set<int> joined_, gone_;
  std::thread thread_;
};

TcpStore::TcpStore(const std::string& host, int port, bool serve, int rank,
                   std::chrono::milliseconds timeout)
    : where_(host + ":" + std::to_string(port)), rank_(rank), timeout_(timeout) {
  if (serve) server_ = std::make_unique<TcpStoreServer>(port);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
    throw Error("rank " + std::to_string(rank) + ": cannot resolve the rendezvous address '" +
                host + "' (MASTER_ADDR): give an IPv4 address or a host name this machine knows");
  sockaddr_in address{};
  std::memcpy(&address, found->ai_addr, sizeof(address));
  ::freeaddrinfo(found);

  // Rank 0 may not be listening yet: try again until the deadline.
  const WaitingForPeers waiting("the rendezvous");
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw Error("cannot create a socket: " + errno_text());
    if (connect_before(fd_, address, deadline)) break;
    ::close(fd_);
    fd_ = -1;
    if (Clock::now() > deadline)
      throw Error("rank " + std::to_string(rank) + ": " +
                  waited_dist_timeout(timeout.count() / 1000.0) + " for rank 0's rendezvous at " +
                  where_ +
                  " (is rank 0 running, and MASTER_ADDR/MASTER_PORT the same on every rank?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

std::pair<bool, std::vector<char>> TcpStore::request(Op op, const std::string& key,
                                                     const std::vector<char>& value,
                                                     std::chrono::milliseconds timeout) {
  std::vector<char> message = {static_cast<char>(op)};
  append_field(message, key.data(), static_cast<uint32_t>(key.size()));
  append_field(message, value.data(), static_cast<uint32_t>(value.size()));
  const auto deadline = Clock::now() + timeout;
  uint8_t found = 0;
  uint32_t size = 0;
  std::vector<char> reply;
  bool ok = send_all(fd_, message.data(), message.size(), deadline) &&
            receive_all(fd_, &found, 1, deadline) &&
            receive_all(fd_, &size, sizeof(size), deadline) && size <= kLargestField;
  if (ok) {
    reply.resize(size);
    ok = receive_all(fd_, reply.data(), size, deadline);
  }
  if (!ok)
    throw Error("rank " + std::to_string(rank_) + ": lost the rendezvous at " + where_ +
                " (did rank 0 exit, die or hang?)");
  return {found != 0, std::move(reply)};
}

void TcpStore::set(const std::string& key, const std::vector<char>& value) {
  request(kSet, key, value, timeout_);
}

bool TcpStore::join(int rank) {
  return request(kJoin, std::to_string(rank), {}, timeout_).first;
}

std::vector<int> TcpStore::ranks_gone(std::chrono::milliseconds timeout) {
  const std::vector<char> reply = request(kGone, "", {}, timeout).second;
  const std::string text(reply.begin(), reply.end());
  std::vector<int> ranks;
  for (size_t at = 0; at < text.size();) {
    ranks.push_back(std::atoi(text.c_str() + at));
    while (at < text.size() && text[at] != ',') ++at;
    ++at;
  }
  return ranks;
}

std::optional<std::vector<char>> TcpStore::try_get(const std::string& key) {
  auto [found, value] = request(kGet, key, {}, timeout_);
  if (!found) return std::nullopt;
  return value;
}

std::vector<char> TcpStore::get(const std::string& key) {
  wait({key}, timeout_);
  return *try_get(key);
}

void TcpStore::wait(const std::vector<std::string>& keys,
                    const std::chrono::milliseconds& timeout) {
  const WaitingForPeers waiting("the rendezvous");
  const auto deadline = Clock::now() + timeout;
  for (const std::string& key : keys)
    while (!try_get(key)) {
      if (Clock::now() > deadline)
        throw Error("rank " + std::to_string(rank_) + ": " +
                    waited_dist_timeout(timeout.count() / 1000.0) +
                    " at the rendezvous for the other ranks (did one fail to start? is WORLD_SIZE "
                    "the same on every rank?)");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

}  // namespace folio
