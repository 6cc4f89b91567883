#include "engine/dist/rank_bootstrap.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "engine/dist/rank_fingerprint.h"

namespace sparkglm::dist {

namespace {

// A connection must say who it is this soon, or it is dropped (a port scan must not hold the
// rendezvous until its deadline).
constexpr std::chrono::seconds kHelloTimeout{10};
constexpr uint32_t kMagic = 0x31524753;            // "SGR1"
constexpr uint32_t kMaxHello = uint32_t(1) << 20;  // a fingerprint is a few KiB

using Clock = std::chrono::steady_clock;

[[noreturn]] void io_error(const std::string& what) {
  throw Error(ErrorKind::kIo, what + ": " + std::strerror(errno));
}

sockaddr_in resolve(const std::string& addr, int port) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (::getaddrinfo(addr.c_str(), nullptr, &hints, &found) != 0 || !found)
    throw Error(ErrorKind::kInvalidArgument, "--master-addr " + addr + ": not an IPv4 host");
  sockaddr_in a = *reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  ::freeaddrinfo(found);
  a.sin_port = htons(uint16_t(port));
  return a;
}

// Waits until fd is readable, or throws kIo once the deadline passes.
void wait_readable(int fd, Clock::time_point deadline, const std::string& what) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) throw Error(ErrorKind::kIo, "timed out waiting for " + what);
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, int(std::min<int64_t>(left.count(), 1000)));
    if (n > 0) return;
    if (n < 0 && errno != EINTR) io_error("poll");
  }
}

void send_all(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) io_error("rank bootstrap: send");
    p += n;
    bytes -= size_t(n);
  }
}

void recv_all(int fd, void* data, size_t bytes, Clock::time_point deadline,
              const std::string& who) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    wait_readable(fd, deadline, who);
    const ssize_t n = ::recv(fd, p, bytes, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) throw Error(ErrorKind::kIo, who + " closed the connection during the bootstrap");
    if (n < 0) io_error("rank bootstrap: recv from " + who);
    p += n;
    bytes -= size_t(n);
  }
}

// A frame: u32 tag, u32 a, u32 b, u32 length, then `length` bytes of text.
struct Frame {
  uint32_t tag = 0, a = 0, b = 0;
  std::string text;
};

void send_frame(int fd, const Frame& f) {
  const uint32_t head[4] = {f.tag, f.a, f.b, uint32_t(f.text.size())};
  send_all(fd, head, sizeof head);
  send_all(fd, f.text.data(), f.text.size());
}

Frame recv_frame(int fd, Clock::time_point deadline, const std::string& who) {
  uint32_t head[4];
  recv_all(fd, head, sizeof head, deadline, who);
  if (head[3] > kMaxHello)
    throw Error(ErrorKind::kInvalidArgument, who + " sent a " + std::to_string(head[3]) +
                                                 "-byte bootstrap frame (at most " +
                                                 std::to_string(kMaxHello) + ")");
  Frame f{head[0], head[1], head[2], std::string(head[3], '\0')};
  recv_all(fd, f.text.data(), f.text.size(), deadline, who);
  return f;
}

void no_delay(int fd) {  // collectives are small messages waiting on each other
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

std::unique_ptr<SocketCommunicator> accept_ranks(const RankAddress& a, const nlohmann::json& mine,
                                                 int listen_fd) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(a.timeout_s * 1000));
  std::vector<int> peers(size_t(a.world_size), -1);
  auto close_all = [&] {
    for (int fd : peers)
      if (fd >= 0) ::close(fd);
    ::close(listen_fd);
  };
  try {
    for (int joined = 1; joined < a.world_size;) {
      wait_readable(listen_fd, deadline,
                    std::to_string(a.world_size - joined) + " more rank(s) to connect to port " +
                        std::to_string(listening_port(listen_fd)));
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      no_delay(fd);
      Frame hello;
      try {
        hello =
            recv_frame(fd, std::min(deadline, Clock::now() + kHelloTimeout), "a connecting rank");
      } catch (const Error&) {  // not a rank (a port scan, a stale client): keep waiting
        ::close(fd);
        continue;
      }
      const int r = int(hello.b);
      std::string refusal;
      if (hello.tag != kMagic) {
        refusal = "not a sparkglm rank (bad magic)";
      } else if (int(hello.a) != a.world_size) {
        refusal = "rank " + std::to_string(r) + " has --world-size " + std::to_string(hello.a) +
                  ", rank 0 has " + std::to_string(a.world_size);
      } else if (r < 1 || r >= a.world_size) {
        refusal = "rank " + std::to_string(r) + " is out of range";
      } else if (peers[size_t(r)] >= 0) {
        refusal = "rank " + std::to_string(r) + " joined twice";
      } else {
        // Anyone can connect to this port: the fingerprint is bounded before it is parsed
        // (the comparison and the message recurse once per level).
        try {
          refusal = fingerprint_difference(
              mine,
              parse_json(hello.text, "rank " + std::to_string(r) + "'s fingerprint",
                         ErrorKind::kInvalidArgument, json_limits::kRankFingerprint),
              r);
        } catch (const Error& e) {
          refusal = e.what();
        }
      }
      send_frame(fd, {kMagic, refusal.empty() ? 0u : 1u, 0, refusal});
      if (!refusal.empty()) {
        ::close(fd);
        throw Error(ErrorKind::kInvalidArgument, "refusing to start: " + refusal);
      }
      peers[size_t(r)] = fd;
      ++joined;
    }
  } catch (...) {
    close_all();
    throw;
  }
  ::close(listen_fd);
  return std::make_unique<SocketCommunicator>(0, std::move(peers));
}

std::unique_ptr<SocketCommunicator> connect_rank(const RankAddress& a, const nlohmann::json& mine) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(a.timeout_s * 1000));
  const sockaddr_in target = resolve(a.master_addr, a.master_port);
  const std::string where = a.master_addr + ":" + std::to_string(a.master_port);
  int fd = -1;
  for (;;) {  // rank 0 may not listen yet
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) io_error("socket");
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&target), sizeof target) == 0) break;
    ::close(fd);
    if (Clock::now() > deadline)
      throw Error(ErrorKind::kIo, "rank " + std::to_string(a.rank) + ": rank 0 at " + where +
                                      " did not accept within " + std::to_string(a.timeout_s) +
                                      " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  no_delay(fd);
  try {
    send_frame(fd, {kMagic, uint32_t(a.world_size), uint32_t(a.rank), mine.dump()});
    const Frame reply = recv_frame(fd, deadline, "rank 0 at " + where);
    if (reply.tag != kMagic) throw Error(ErrorKind::kIo, where + " is not a sparkglm rank 0");
    if (reply.a != 0)
      throw Error(ErrorKind::kInvalidArgument, "rank 0 refused this rank: " + reply.text);
  } catch (...) {
    ::close(fd);
    throw;
  }
  std::vector<int> peers(size_t(a.world_size), -1);
  peers[0] = fd;
  return std::make_unique<SocketCommunicator>(a.rank, std::move(peers));
}

}  // namespace

int listen_for_ranks(const std::string& addr, int port) {
  const sockaddr_in a = resolve(addr, port);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) io_error("socket");
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 64) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    io_error("rank bootstrap: cannot listen on " + addr + ":" + std::to_string(port));
  }
  return fd;
}

int listening_port(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) io_error("getsockname");
  return ntohs(a.sin_port);
}

std::unique_ptr<SocketCommunicator> join_ranks(const RankAddress& a,
                                               const nlohmann::json& fingerprint, int listen_fd) {
  if (a.rank != 0) return connect_rank(a, fingerprint);
  if (listen_fd < 0) listen_fd = listen_for_ranks(a.master_addr, a.master_port);
  return accept_ranks(a, fingerprint, listen_fd);
}

}  // namespace sparkglm::dist
