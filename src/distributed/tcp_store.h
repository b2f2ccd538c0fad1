// The rendezvous of Gloo ranks started without MPI: a small key-value store over TCP, through
// which the ranks exchange their addresses. Gloo's Debian build ships file, in-process and Redis
// stores, but no TCP store, which is what torchrun-style launches need (PyTorch's TCPStore plays
// this part there). Rank 0 serves it at MASTER_ADDR:MASTER_PORT from a thread; every rank, rank 0
// included, is a client, joins as its rank, and stays connected for the whole job, so that when
// a collective fails the store can say which ranks are gone (their connection closed).
//
// Protocol (integers in the hosts' byte order): a request is
// [op u8][key length u32][key][value length u32][value]; the answer is
// [found u8][value length u32][value]. set: stores the value; get: the value if the key is there
// (found 0 otherwise); join: this connection is rank <key> (found 0 if that rank joined already);
// gone: the ranks whose connection closed, as text ("2,5").
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

namespace folio {

class TcpStoreServer;

class TcpStore final : public gloo::rendezvous::Store {
 public:
  // Connects to host:port, first serving it there when `serve` (rank 0). Waits up to `timeout`
  // for the server to appear; `rank` is for error messages.
  TcpStore(const std::string& host, int port, bool serve, int rank,
           std::chrono::milliseconds timeout);
  ~TcpStore() override;

  void set(const std::string& key, const std::vector<char>& value) override;
  std::vector<char> get(const std::string& key) override;  // waits for the key
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;
  // Says that this connection is `rank`; false when another process joined as that rank.
  bool join(int rank);
  // The ranks that joined and whose connection has closed since (they exited or died). Throws
  // when the store itself is gone (rank 0 exited or died).
  std::vector<int> ranks_gone(std::chrono::milliseconds timeout);

 private:
  enum Op : uint8_t { kSet = 1, kGet = 2, kJoin = 3, kGone = 4 };
  // One request and its answer: (found, value).
  std::pair<bool, std::vector<char>> request(Op op, const std::string& key,
                                             const std::vector<char>& value,
                                             std::chrono::milliseconds timeout);
  std::optional<std::vector<char>> try_get(const std::string& key);

  std::string where_;  // "host:port", for messages
  int rank_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<TcpStoreServer> server_;  // rank 0 only
  int fd_ = -1;
};

}  // namespace folio
