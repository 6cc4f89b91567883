#include "harness/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "engine/core/error.h"
#include "harness/server_api.h"

extern char** environ;

namespace sparkglm::harness {

namespace {

using Clock = std::chrono::steady_clock;

std::optional<std::string> flag_value(const std::vector<std::string>& args, const std::string& f) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == f) return args[i + 1];
  return std::nullopt;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The port from the server's "listening on http://HOST:PORT" log line, 0 while it is not there.
int32_t logged_port(const std::string& log) {
  static const std::regex line(R"(listening on http://[^\s:/]+:(\d+))");
  std::smatch m;
  if (!std::regex_search(log, m, line)) return 0;
  return int32_t(std::stol(m[1].str()));
}

}  // namespace

std::string ServerExit::describe() const {
  std::string s = exited ? "exit " + std::to_string(code)
                         : "signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  if (killed_after_grace) s += ", SIGKILL after the stop grace ran out";
  return s;
}

ServerProcess::ServerProcess(ServerProcessOptions options) : options_(std::move(options)) {
  if (options_.binary.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "server `binary`: expected the path of sparkglm-serve");
  if (options_.log_path.empty())
    throw Error(ErrorKind::kInvalidArgument, "server `log_path`: expected a file path");
  std::vector<std::string> args = options_.args;
  const std::optional<std::string> given_port = flag_value(args, "--port");
  std::optional<std::string> bind = flag_value(args, "--bind");
  if (!bind) {
    args.insert(args.end(), {"--bind", "127.0.0.1"});
    bind = "127.0.0.1";
  }
  // The server binds port 0 itself and logs the port the kernel gave it: no window in which
  // another process could take a port picked here.
  if (!given_port) args.insert(args.end(), {"--port", "0"});
  argv_ = {options_.binary};
  argv_.insert(argv_.end(), args.begin(), args.end());
  const std::string host = (*bind == "0.0.0.0" || bind->empty()) ? "127.0.0.1" : *bind;

  const int log_fd =
      ::open(options_.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0)
    throw Error(ErrorKind::kIo, "server log `" + options_.log_path +
                                    "`: cannot be created: " + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 2);
  std::vector<char*> cargv;
  for (std::string& a : argv_) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const int rc =
      posix_spawn(&pid_, options_.binary.c_str(), &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(log_fd);
  if (rc != 0) {
    pid_ = -1;
    throw Error(ErrorKind::kIo,
                "server `" + options_.binary + "` could not be started: " + std::strerror(rc));
  }

  const auto deadline = Clock::now() + std::chrono::duration<double>(options_.start_timeout_s);
  std::string why;
  while (true) {
    if (reap(false)) {
      why = "exited before it was healthy (" + exit_->describe() + ")";
      break;
    }
    if (port_ == 0)
      port_ =
          given_port ? int32_t(std::stol(*given_port)) : logged_port(read_file(options_.log_path));
    if (port_ != 0) {
      base_url_ = "http://" + host + ":" + std::to_string(port_);
      if (http_get(base_url_ + "/health", 2).ok()) return;
    }
    if (Clock::now() >= deadline) {
      why = "was not healthy within " + std::to_string(options_.start_timeout_s) + " s" +
            (port_ == 0 ? " (no \"listening on\" line in its log)" : "");
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string tail = log_tail();
  if (!exit_) stop();
  throw Error(ErrorKind::kIo, "server `" + options_.binary + "` " + why + "; log " +
                                  options_.log_path + " ends:\n" + tail);
}

ServerProcess::~ServerProcess() {
  try {
    stop();
  } catch (...) {  // a destructor must not throw; stop() only fails on a broken pid
  }
}

bool ServerProcess::reap(bool block) {
  if (exit_) return true;
  if (pid_ <= 0) return false;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r != pid_) return false;
  ServerExit e;
  e.exited = WIFEXITED(status);
  e.code = e.exited ? WEXITSTATUS(status) : 0;
  e.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  e.killed_after_grace = killed_;
  exit_ = e;
  return true;
}

bool ServerProcess::running() {
  return pid_ > 0 && !reap(false);
}

ServerExit ServerProcess::stop() {
  if (pid_ <= 0) return ServerExit{};
  if (reap(false)) return *exit_;
  ::kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::duration<double>(options_.stop_grace_s);
  while (Clock::now() < deadline) {
    if (reap(false)) return *exit_;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  killed_ = true;
  ::kill(pid_, SIGKILL);
  reap(true);
  return *exit_;
}

std::string ServerProcess::log_tail(size_t max_bytes) const {
  const std::string log = read_file(options_.log_path);
  return log.size() <= max_bytes ? log : log.substr(log.size() - max_bytes);
}

}  // namespace sparkglm::harness
