#include "engine/dist/socket_communicator.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/core/error.h"

namespace sparkglm::dist {

namespace {

[[noreturn]] void lost(int peer, const std::string& what) {
  throw Error(ErrorKind::kDeviceFatal, "rank " + std::to_string(peer) + " is gone (" + what +
                                           "): the ranks cannot continue");
}

}  // namespace

SocketCommunicator::SocketCommunicator(int rank, std::vector<int> peers)
    : rank_(rank), peers_(std::move(peers)) {
  SPARKGLM_ASSERT(rank_ >= 0 && rank_ < int(peers_.size()),
                  "SocketCommunicator: rank out of range");
}

SocketCommunicator::~SocketCommunicator() {
  for (int fd : peers_)
    if (fd >= 0) ::close(fd);
}

std::vector<std::unique_ptr<SocketCommunicator>> SocketCommunicator::local_group(int world_size) {
  std::vector<std::vector<int>> peers(size_t(world_size), std::vector<int>(size_t(world_size), -1));
  for (int r = 1; r < world_size; ++r) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
      throw Error(ErrorKind::kIo, std::string("socketpair: ") + std::strerror(errno));
    peers[0][size_t(r)] = pair[0];
    peers[size_t(r)][0] = pair[1];
  }
  std::vector<std::unique_ptr<SocketCommunicator>> group;
  for (int r = 0; r < world_size; ++r)
    group.push_back(std::make_unique<SocketCommunicator>(r, std::move(peers[size_t(r)])));
  return group;
}

void SocketCommunicator::send_to(int peer, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(peers_[size_t(peer)], p, bytes, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) lost(peer, std::string("send: ") + std::strerror(errno));
    p += n;
    bytes -= size_t(n);
  }
}

void SocketCommunicator::recv_from(int peer, void* data, size_t bytes) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::recv(peers_[size_t(peer)], p, bytes, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) lost(peer, "its connection closed");
    if (n < 0) lost(peer, std::string("recv: ") + std::strerror(errno));
    p += n;
    bytes -= size_t(n);
  }
}

void SocketCommunicator::all_reduce_sum(float* data, size_t n) {
  const int world = world_size();
  if (world == 1 || n == 0) return;
  if (rank_ != 0) {
    send_to(0, data, n * sizeof(float));
    recv_from(0, data, n * sizeof(float));
    return;
  }
  scratch_.resize(n);
  for (int r = 1; r < world; ++r) {  // rank order, whatever order the peers sent in
    recv_from(r, scratch_.data(), n * sizeof(float));
    for (size_t i = 0; i < n; ++i) data[i] += scratch_[i];
  }
  for (int r = 1; r < world; ++r) send_to(r, data, n * sizeof(float));
}

void SocketCommunicator::broadcast(void* data, size_t bytes, int root) {
  const int world = world_size();
  if (world == 1 || bytes == 0) return;
  if (rank_ == 0) {
    if (root != 0) recv_from(root, data, bytes);
    for (int r = 1; r < world; ++r)
      if (r != root) send_to(r, data, bytes);
  } else if (rank_ == root) {
    send_to(0, data, bytes);
  } else {
    recv_from(0, data, bytes);
  }
}

void SocketCommunicator::all_gather(const void* in, size_t bytes, void* out) {
  char* o = static_cast<char*>(out);
  std::memcpy(o + size_t(rank_) * bytes, in, bytes);
  const int world = world_size();
  if (world == 1 || bytes == 0) return;
  if (rank_ != 0) {
    send_to(0, in, bytes);
    recv_from(0, out, bytes * size_t(world));
    return;
  }
  for (int r = 1; r < world; ++r) recv_from(r, o + size_t(r) * bytes, bytes);
  for (int r = 1; r < world; ++r) send_to(r, out, bytes * size_t(world));
}

bool SocketCommunicator::peer_lost() {
  for (int fd : peers_) {
    if (fd < 0) continue;
    pollfd p{fd, POLLRDHUP, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) return true;
  }
  return false;
}

}  // namespace sparkglm::dist
