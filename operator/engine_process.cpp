#include "operator/engine_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
#include "operator/http_get.h"
#include "operator/profile_store.h"
#include "operator/recipe_fetch.h"

namespace sparkglm::operator_tool {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);

// A live (not zombie) process whose executable is sparkglm-serve.
bool is_serve_process(int pid) {
  if (pid <= 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size() || line[close + 2] == 'Z' ||
      line[close + 2] == 'X')
    return false;
  std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
  std::string argv0;
  std::getline(cmdline, argv0, '\0');
  return fs::path(argv0).filename() == "sparkglm-serve";
}

std::string last_lines(const std::string& text, size_t lines) {
  if (lines == 0) return text;
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (size_t n = 0; pos > 0; --pos) {
    if (text[pos - 1] == '\n' && ++n == lines) break;
  }
  return text.substr(pos);
}

// "listening on http://127.0.0.1:8893" in the log since `offset`.
std::string listening_url(const std::string& log, size_t offset) {
  const std::string marker = "listening on ";
  const size_t at = log.find(marker, offset);
  if (at == std::string::npos) return "";
  const size_t end = log.find_first_of(" \r\n", at + marker.size());
  return log.substr(at + marker.size(), end == std::string::npos ? end : end - at - marker.size());
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

EngineProcess::EngineProcess(std::string state_dir) : state_dir_(std::move(state_dir)) {}

std::string EngineProcess::log_path() const {
  return (fs::path(state_dir_) / "engine.log").string();
}

std::optional<EngineRecord> EngineProcess::running(std::string* stale_note) const {
  const fs::path pid_file = fs::path(state_dir_) / "engine.pid";
  std::ifstream in(pid_file);
  int pid = 0;
  if (!(in >> pid)) return std::nullopt;
  if (!is_serve_process(pid)) {
    std::error_code ec;
    fs::remove(pid_file, ec);
    if (stale_note)
      *stale_note = "removed the stale pid file " + pid_file.string() + " (process " +
                    std::to_string(pid) + " is not a running sparkglm-serve)";
    return std::nullopt;
  }
  EngineRecord r;
  r.pid = pid;
  try {
    r.raw = json::parse(read_text_file((fs::path(state_dir_) / "engine.json").string()));
    if (r.raw.value("pid", 0) == pid) {
      r.url = r.raw.value("url", "");
      r.profile = r.raw.value("profile", "");
      r.started_at = r.raw.value("started_at", "");
    }
  } catch (const std::exception&) {
    // The record is a convenience: a running process without it is still reported.
  }
  return r;
}

EngineRecord EngineProcess::start(const StartRequest& request) const {
  if (auto r = running())
    throw Error(ErrorKind::kInvalidArgument,
                "the engine is already running (pid " + std::to_string(r->pid) +
                    (r->url.empty() ? "" : ", " + r->url) + "); `sparkglm stop` stops it");
  if (request.port != 0 && !port_is_free(request.bind, request.port))
    throw Error(ErrorKind::kInvalidArgument,
                "port " + std::to_string(request.port) + " on " + request.bind +
                    " is taken by another process (give --port N, or --port 0 for any free one)");
  if (access(request.serve_binary.c_str(), X_OK) != 0)
    throw Error(ErrorKind::kIo, "cannot run " + request.serve_binary + ": " + std::strerror(errno));
  std::error_code ec;
  fs::create_directories(state_dir_, ec);
  const std::string log = log_path();
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) throw Error(ErrorKind::kIo, "cannot open " + log + ": " + std::strerror(errno));
  const std::string started_at = utc_now_iso8601();
  const std::string banner = "=== sparkglm start " + started_at + " ===\n";
  // The banner only helps a reader of the log; a failure to write it shows up on the next write.
  [[maybe_unused]] const ssize_t written = ::write(log_fd, banner.data(), banner.size());
  const size_t offset = size_t(::lseek(log_fd, 0, SEEK_END));

  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(request.serve_binary.c_str()));
  for (const std::string& a : request.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw Error(ErrorKind::kIo, std::string("cannot fork: ") + std::strerror(errno));
  if (pid == 0) {
    // The child: its own session (no terminal hangup reaches it), output to the log.
    setsid();
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(argv[0], argv.data());
    // Only async-signal-safe calls between fork and exec: no allocation here.
    const char* reason = std::strerror(errno);
    for (const char* part :
         {"cannot execute ", static_cast<const char*>(argv[0]), ": ", reason, "\n"}) {
      if (::write(2, part, std::strlen(part)) < 0) break;
    }
    _exit(127);
  }
  ::close(log_fd);

  EngineRecord r;
  r.pid = pid;
  r.profile = request.profile;
  r.started_at = started_at;
  auto record = [&] {
    r.raw = {{"pid", pid},   {"binary", request.serve_binary}, {"args", request.args},
             {"url", r.url}, {"profile", request.profile},     {"started_at", started_at},
             {"log", log}};
    write_file_atomically((fs::path(state_dir_) / "engine.json").string(), r.raw.dump(2) + "\n");
  };
  record();
  write_file_atomically((fs::path(state_dir_) / "engine.pid").string(), std::to_string(pid) + "\n");

  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(int64_t(request.wait_s * 1000.0));
  while (true) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      fs::remove(fs::path(state_dir_) / "engine.pid", ec);
      const std::string how = WIFEXITED(status)
                                  ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                  : "was killed by signal " + std::to_string(WTERMSIG(status));
      const std::string text = read_text_file(log);
      throw Error(ErrorKind::kIo, "sparkglm-serve " + how + " before it was healthy; its log (" +
                                      log + ") ends:\n" +
                                      last_lines(text.substr(std::min(offset, text.size())), 15));
    }
    if (r.url.empty()) {
      r.url = listening_url(read_text_file(log), offset);
      if (!r.url.empty()) record();
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
  const auto r = running();
  if (!r) return false;
  ::kill(r->pid, SIGTERM);
  const auto wait_gone = [&](double seconds) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(seconds * 1000.0));
    while (is_serve_process(r->pid)) {
      waitpid(r->pid, nullptr, WNOHANG);  // reaps it when this process happens to be its parent
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(kPoll);
    }
    return true;
  };
  bool gone = wait_gone(timeout_s);
  if (!gone && force) {
    ::kill(r->pid, SIGKILL);
    gone = wait_gone(10.0);
  }
  if (!gone)
    throw Error(ErrorKind::kIo, "sparkglm-serve (pid " + std::to_string(r->pid) +
                                    ") is still running " + std::to_string(int(timeout_s)) +
                                    " s after SIGTERM; `sparkglm stop --force` kills it");
  std::error_code ec;
  fs::remove(fs::path(state_dir_) / "engine.pid", ec);
  return true;
}

std::string EngineProcess::log_tail(size_t lines) const {
  std::error_code ec;
  if (!fs::exists(log_path(), ec)) return "";
  return last_lines(read_text_file(log_path()), lines);
}

}  // namespace sparkglm::operator_tool
