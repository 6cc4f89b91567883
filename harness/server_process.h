#pragma once
// A sparkglm-serve child process on a loopback port: started with the given flags, its stdout and
// stderr in a log file, ready once /health answers. Used by the runner and by the tests.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sparkglm::harness {

struct ServerProcessOptions {
  std::string binary;             // path of the sparkglm-serve binary
  std::vector<std::string> args;  // its flags; without --port, "--bind 127.0.0.1 --port 0" is
                                  // added and the port the server picked is read from its log
  std::string log_path;           // receives stdout and stderr (truncated at start)
  double start_timeout_s = 120;   // until /health answers 200
  double stop_grace_s = 30;       // after SIGTERM, before SIGKILL
};

struct ServerExit {
  bool exited = false;  // exited normally (code valid); otherwise killed by `signal`
  int32_t code = 0;
  int32_t signal = 0;
  bool killed_after_grace = false;  // SIGTERM was not enough and SIGKILL was sent
  bool clean() const { return exited && code == 0 && !killed_after_grace; }
  std::string describe() const;  // "exit 0", "exit 3", "signal 9 (SIGKILL after 30 s grace)"
};

class ServerProcess {
 public:
  // Starts the binary and waits for /health. Throws Error(kIo) with the log's tail when it cannot
  // start, exits first, or is not healthy within start_timeout_s (the child is killed then).
  explicit ServerProcess(ServerProcessOptions options);
  ~ServerProcess();  // stop() when still running
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  const std::string& base_url() const { return base_url_; }  // "http://127.0.0.1:PORT"
  int32_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::vector<std::string>& argv() const { return argv_; }  // binary and flags as run
  const std::string& log_path() const { return options_.log_path; }

  bool running();  // false once the child has exited (its status then kept for stop())
  // SIGTERM, up to stop_grace_s for it to exit, then SIGKILL. Idempotent: later calls return the
  // same status.
  ServerExit stop();
  std::string log_tail(size_t max_bytes = 4000) const;

 private:
  bool reap(bool block);  // true when the child's status was collected

  ServerProcessOptions options_;
  std::vector<std::string> argv_;
  pid_t pid_ = -1;
  int32_t port_ = 0;
  std::string base_url_;
  std::optional<ServerExit> exit_;
  bool killed_ = false;
};

}  // namespace sparkglm::harness
