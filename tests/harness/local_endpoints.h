#pragma once
// Endpoints for the harness tests: a tinyglm-micro sparkglm-serve (through ServerProcess), and
// three sockets that need no server code: one that answers with scripted bytes, one that accepts
// and never answers (a timeout), and one that refuses (a bound port nobody listens on).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness/server_process.h"
#include "tests/support/build_paths.h"

namespace sparkglm::harness::testing {

inline std::string serve_binary() {
  return sparkglm::testing::binary_dir() + "/sparkglm-serve";
}

// A fresh log name per server, so that tests of one binary never share a log.
inline std::string temp_log(const std::string& stem) {
  static std::atomic<int> n{0};
  return ::testing::TempDir() + "harness-" + stem + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(n++) + ".log";
}

// Small and fast, as tests/python/test_server_lifecycle.py starts it.
inline std::unique_ptr<ServerProcess> start_tiny_server(std::vector<std::string> extra = {}) {
  ServerProcessOptions o;
  o.binary = serve_binary();
  o.args = {"--preset",
            "tinyglm-micro",
            "--threads",
            "2",
            "--max-num-seqs",
            "4",
            "--max-seq-len",
            "32768",
            "--kv-cache-memory-bytes",
            "24MiB",
            "--max-prefill-tokens",
            "256"};
  o.args.insert(o.args.end(), extra.begin(), extra.end());
  o.log_path = temp_log("serve");
  o.start_timeout_s = 60;
  return std::make_unique<ServerProcess>(std::move(o));
}

// A TCP socket bound to a kernel-chosen loopback port.
class LoopbackSocket {
 public:
  LoopbackSocket() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw std::runtime_error("cannot bind a loopback socket");
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~LoopbackSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Accepts one connection, reads the request, then writes `pieces` one by one with `pause` between
// them and closes (the close ends the body). The request it read is kept for the test to check.
class ScriptedServer {
 public:
  ScriptedServer(std::vector<std::string> pieces, std::chrono::milliseconds pause)
      : pieces_(std::move(pieces)), pause_(pause) {
    ::listen(socket_.fd(), 4);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    ::shutdown(socket_.fd(), SHUT_RDWR);  // unblocks accept() when no client came
    thread_.join();
  }
  std::string base_url() const { return socket_.base_url(); }
  std::string request() {
    std::lock_guard<std::mutex> lock(mutex_);
    return request_;
  }

 private:
  void serve() {
    const int c = ::accept(socket_.fd(), nullptr, nullptr);
    if (c < 0) return;
    std::string in;
    char buf[4096];
    size_t need = std::string::npos;
    while (need == std::string::npos || in.size() < need) {
      const ssize_t n = ::read(c, buf, sizeof buf);
      if (n <= 0) break;
      in.append(buf, size_t(n));
      const size_t head = in.find("\r\n\r\n");
      if (need == std::string::npos && head != std::string::npos) {
        const size_t cl = in.find("Content-Length: ");
        need = head + 4 + (cl == std::string::npos ? 0 : std::stoul(in.substr(cl + 16)));
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      request_ = in;
    }
    for (size_t i = 0; i < pieces_.size(); ++i) {
      if (i) std::this_thread::sleep_for(pause_);
      if (::send(c, pieces_[i].data(), pieces_[i].size(), MSG_NOSIGNAL) < 0) break;
    }
    ::close(c);
  }

  LoopbackSocket socket_;
  std::vector<std::string> pieces_;
  std::chrono::milliseconds pause_;
  std::thread thread_;
  std::mutex mutex_;
  std::string request_;
};

inline const char* kSseHead =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";

}  // namespace sparkglm::harness::testing
