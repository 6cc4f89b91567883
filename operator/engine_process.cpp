#include "operator/engine_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "engine/core/utc_time.h"
#include "operator/http_get.h"
#include "operator/recipe_fetch.h"
#include "operator/secret_redaction.h"

extern char** environ;

namespace sparkglm::operator_tool {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);

std::string last_lines(const std::string& text, size_t lines) {
  if (lines == 0) return text;
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (size_t n = 0; pos > 0; --pos) {
    if (text[pos - 1] == '\n' && ++n == lines) break;
  }
  return text.substr(pos);
}

// What the log holds after `offset` (this start's output).
std::string log_since(const std::string& path, size_t offset) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(std::streamoff(offset));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// The server's own "<time> listening on http://127.0.0.1:8893" line in this start's output: the
// first line whose message (after the timestamp) begins so. Client strings in the log are quoted
// and escaped inside other messages (server_log.h), so they cannot begin a message of their own.
std::string listening_url(const std::string& log) {
  const std::string marker = "listening on ";
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    const size_t space = line.find(' ');
    if (space == std::string::npos || line.compare(space + 1, marker.size(), marker) != 0) continue;
    const std::string url = line.substr(space + 1 + marker.size());
    if (url.rfind("http://", 0) == 0) return url.substr(0, url.find_first_of(" \r"));
  }
  return "";
}

bool healthy(const std::string& url) {
  try {
    HttpLimits limits;
    limits.timeout_s = 2.0;
    limits.max_bytes = 1 << 16;
    return http_get(url + "/health", limits).status == 200;
  } catch (const Error&) {
    return false;
  }
}

// Forks and execs the server in its own session with stdin on /dev/null and output on `log_fd`.
// Returns once the exec has happened (a close-on-exec pipe reports an exec failure's errno).
pid_t launch(const StartRequest& request, int log_fd) {
  std::vector<std::string> env_text;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const auto& [key, value] : request.env) replaced |= entry.rfind(key + "=", 0) == 0;
    if (!replaced) env_text.push_back(entry);
  }
  for (const auto& [key, value] : request.env) env_text.push_back(key + "=" + value);
  std::vector<char*> envp, argv;
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  argv.push_back(const_cast<char*>(request.serve_binary.c_str()));
  for (const std::string& a : request.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0)
    throw Error(ErrorKind::kIo, std::string("cannot create a pipe: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) throw Error(ErrorKind::kIo, std::string("cannot fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec: no allocation here.
    setsid();
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(argv[0], argv.data(), envp.data());
    const int err = errno;
    [[maybe_unused]] const ssize_t n = ::write(exec_pipe[1], &err, sizeof err);
    _exit(127);
  }
  ::close(exec_pipe[1]);
  int err = 0;
  ssize_t n;
  while ((n = ::read(exec_pipe[0], &err, sizeof err)) < 0 && errno == EINTR) {
  }
  ::close(exec_pipe[0]);
  if (n == ssize_t(sizeof err)) {
    waitpid(pid, nullptr, 0);
    throw Error(ErrorKind::kIo,
                "cannot execute " + request.serve_binary + ": " + std::strerror(err));
  }
  return pid;
}

[[noreturn]] void exited_before_healthy(int status, const std::string& log, size_t offset) {
  const std::string how = WIFEXITED(status)
                              ? "exited with status " + std::to_string(WEXITSTATUS(status))
                              : "was killed by signal " + std::to_string(WTERMSIG(status));
  throw Error(ErrorKind::kIo, "sparkglm-serve " + how + " before it was healthy; its log (" + log +
                                  ") ends:\n" + last_lines(log_since(log, offset), 15));
}

}  // namespace

std::string default_state_dir() {
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg)
    return (fs::path(xdg) / "sparkglm").string();
  if (const char* home = std::getenv("HOME"); home && *home)
    return (fs::path(home) / ".local" / "state" / "sparkglm").string();
  return ".sparkglm";
}

bool port_is_free(const std::string& bind, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return true;  // cannot tell; the server will say
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  if (inet_pton(AF_INET, bind == "localhost" ? "127.0.0.1" : bind.c_str(), &addr.sin_addr) != 1) {
    ::close(fd);
    return true;  // not an IPv4 address: leave the check to the server
  }
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

EngineProcess::EngineProcess(std::string state_dir) : state_(std::move(state_dir)) {}

std::string EngineProcess::log_path() const {
  return state_.path("engine.log");
}

std::optional<EngineRecord> EngineProcess::running(std::string* stale_note) const {
  const FolderLock lock = state_.lock();
  return running_locked(stale_note);
}

std::optional<EngineRecord> EngineProcess::running_locked(std::string* stale_note) const {
  const std::optional<std::string> pid_text = state_.read("engine.pid");
  if (!pid_text) return std::nullopt;
  const int pid = std::atoi(pid_text->c_str());
  EngineRecord r;
  try {
    r.raw = parse_json(state_.read("engine.json").value_or("null"), "engine.json",
                       ErrorKind::kInvalidConfig, json_limits::kOperatorState);
    if (r.raw.is_object() && r.raw.value("pid", 0) == pid) {
      r.process.pid = pid;
      r.process.start_ticks = r.raw.value("start_ticks", uint64_t(0));
      r.process.exe = r.raw.value("executable", "");
      r.binary_sha256 = r.raw.value("executable_sha256", "");
      r.version = r.raw.value("version", "");
      r.url = r.raw.value("url", "");
      r.profile = r.raw.value("profile", "");
      r.started_at = r.raw.value("started_at", "");
    }
  } catch (const std::exception&) {
    // An unreadable record identifies no process: the pid file is then stale.
  }
  const std::optional<ProcessIdentity> live = read_process_identity(pid);
  std::string why;
  if (!live) {
    why = "process " + std::to_string(pid) + " is not running";
  } else if (r.process.pid != pid || r.process.start_ticks == 0) {
    why = "engine.json does not record the identity of process " + std::to_string(pid);
  } else if (!same_process(*live, r.process)) {
    why = "process " + std::to_string(pid) + " is not the sparkglm-serve started here: it runs " +
          live->exe + " since tick " + std::to_string(live->start_ticks) + ", the record says " +
          r.process.exe + " since tick " + std::to_string(r.process.start_ticks);
  }
  if (why.empty()) {
    r.process.exe_deleted = live->exe_deleted;
    return r;
  }
  state_.remove("engine.pid");
  if (stale_note)
    *stale_note = "removed the stale pid file " + state_.path("engine.pid") + " (" + why + ")";
  return std::nullopt;
}

EngineRecord EngineProcess::start(const StartRequest& request) const {
  if (access(request.serve_binary.c_str(), X_OK) != 0)
    throw Error(ErrorKind::kIo, "cannot run " + request.serve_binary + ": " + std::strerror(errno));
  const std::string log = log_path();
  EngineRecord r;
  size_t offset = 0;
  {
    const FolderLock lock = state_.lock();
    if (auto running = running_locked(nullptr))
      throw Error(ErrorKind::kInvalidArgument,
                  "the engine is already running (pid " + std::to_string(running->process.pid) +
                      (running->url.empty() ? "" : ", " + running->url) +
                      "); `sparkglm stop` stops it");
    if (request.port != 0 && !port_is_free(request.bind, request.port))
      throw Error(ErrorKind::kInvalidArgument,
                  "port " + std::to_string(request.port) + " on " + request.bind +
                      " is taken by another process (give --port N, or --port 0 for any free one)");
    const int log_fd = state_.open_append("engine.log");
    r.started_at = utc_now_iso8601();
    const std::string banner = "=== sparkglm start " + r.started_at + " ===\n";
    // The banner only helps a reader of the log; a failure to write it shows up on the next write.
    [[maybe_unused]] const ssize_t written = ::write(log_fd, banner.data(), banner.size());
    offset = size_t(::lseek(log_fd, 0, SEEK_END));
    pid_t pid = 0;
    try {
      pid = launch(request, log_fd);
    } catch (const Error&) {
      ::close(log_fd);
      throw;
    }
    ::close(log_fd);
    const std::optional<ProcessIdentity> id = read_process_identity(pid);
    if (!id) {  // it already exited (a zombie has no identity)
      int status = 0;
      waitpid(pid, &status, 0);
      exited_before_healthy(status, log, offset);
    }
    r.process = *id;
    // Identity from the process itself: the file the kernel runs, hashed and asked its version.
    const std::string exe = "/proc/" + std::to_string(pid) + "/exe";
    try {
      r.binary_sha256 = executable_sha256(pid);
      r.version = program_version(exe);
    } catch (const Error& e) {
      r.version = "unknown (" + e.message() + ")";
    }
    std::vector<std::string> env_keys;
    for (const auto& [key, value] : request.env) env_keys.push_back(key);
    r.profile = request.profile;
    r.raw = {{"pid", pid},
             {"start_ticks", r.process.start_ticks},
             {"executable", r.process.exe},
             {"executable_sha256", r.binary_sha256},
             {"version", r.version},
             {"binary", request.serve_binary},
             {"args", redact_argv(request.args)},
             {"environment_set", env_keys},  // names only: the values are secrets
             {"url", ""},
             {"profile", request.profile},
             {"started_at", r.started_at},
             {"log", log}};
    state_.write("engine.json", r.raw.dump(2) + "\n");
    state_.write("engine.pid", std::to_string(pid) + "\n");
  }

  // Unlocked while the model loads: `status` and `stop` work meanwhile, and a second `start`
  // finds this one running.
  const pid_t pid = r.process.pid;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(int64_t(request.wait_s * 1000.0));
  while (true) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      const FolderLock lock = state_.lock();
      if (state_.read("engine.pid").value_or("") == std::to_string(pid) + "\n")
        state_.remove("engine.pid");
      exited_before_healthy(status, log, offset);
    }
    if (r.url.empty()) {
      r.url = listening_url(log_since(log, offset));
      if (!r.url.empty()) {
        const FolderLock lock = state_.lock();
        const auto current = running_locked(nullptr);
        if (current && same_process(current->process, r.process)) {
          r.raw["url"] = r.url;
          state_.write("engine.json", r.raw.dump(2) + "\n");
        }
      }
    }
    if (!r.url.empty() && healthy(r.url)) return r;
    if (std::chrono::steady_clock::now() > deadline)
      throw Error(ErrorKind::kIo, "sparkglm-serve (pid " + std::to_string(pid) +
                                      ") is not healthy after " +
                                      std::to_string(int(request.wait_s)) +
                                      " s; it was left running: `sparkglm status`, `sparkglm "
                                      "logs`, `sparkglm stop`");
    std::this_thread::sleep_for(kPoll);
  }
}

bool EngineProcess::stop(double timeout_s, bool force) const {
  const FolderLock lock = state_.lock();
  const auto r = running_locked(nullptr);
  if (!r) return false;
  const ProcessIdentity& engine = r->process;
  const auto wait_gone = [&](double seconds) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(seconds * 1000.0));
    // Gone means exited, not merely uninspectable: an exiting process loses /proc/<pid>/exe
    // before it becomes a zombie, and a caller may check the pid the moment stop returns.
    while (!has_exited(engine)) {
      waitpid(engine.pid, nullptr, WNOHANG);  // reaps it when this process happens to be its parent
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(kPoll);
    }
    return true;
  };
  signal_if_same(engine, SIGTERM);
  bool gone = wait_gone(timeout_s);
  if (!gone && force) {
    signal_if_same(engine, SIGKILL);
    gone = wait_gone(10.0);
  }
  if (!gone)
    throw Error(ErrorKind::kIo, "sparkglm-serve (pid " + std::to_string(engine.pid) +
                                    ") is still running " + std::to_string(int(timeout_s)) +
                                    " s after SIGTERM; `sparkglm stop --force` kills it");
  state_.remove("engine.pid");
  return true;
}

std::string EngineProcess::log_tail(size_t lines) const {
  return last_lines(state_.read("engine.log").value_or(""), lines);
}

}  // namespace sparkglm::operator_tool
