#include "operator/process_identity.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/sha256.h"

namespace sparkglm::operator_tool {

namespace {

constexpr const char* kDeleted = " (deleted)";
constexpr size_t kMaxVersionBytes = 1 << 16;

std::string proc_path(int pid, const char* what) {
  return "/proc/" + std::to_string(pid) + "/" + what;
}

// Runs argv with stdout captured (stdin and stderr on /dev/null); kills it after `timeout`.
std::string capture_stdout(const std::vector<std::string>& args,
                           std::chrono::milliseconds timeout) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0)
    throw Error(ErrorKind::kIo, std::string("cannot create a pipe: ") + std::strerror(errno));
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    ::close(out[0]);
    ::close(out[1]);
    throw Error(ErrorKind::kIo, std::string("cannot fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    dup2(null_fd, 0);
    dup2(out[1], 1);
    dup2(null_fd, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  ::close(out[1]);
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  while (text.size() < kMaxVersionBytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{out[0], POLLIN, 0};
    const int ready = left.count() > 0 ? ::poll(&p, 1, int(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = true;
      break;
    }
    char buf[4096];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, size_t(n));
  }
  ::close(out[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    throw Error(ErrorKind::kIo, args[0] + " " + args[1] + " gave no answer within " +
                                    std::to_string(timeout.count() / 1000) + " s");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error(ErrorKind::kIo,
                args[0] + " " + args[1] + " failed (status " + std::to_string(status) + ")");
  return text;
}

int pidfd_open_for(int pid) {
#ifdef SYS_pidfd_open
  return int(::syscall(SYS_pidfd_open, pid, 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

// The state letter (field 3) and start time (field 22) of /proc/<pid>/stat, or nullopt when the
// pid names no process.
struct StatFields {
  char state = '?';
  uint64_t start_ticks = 0;
};

std::optional<StatFields> read_stat(int pid) {
  std::ifstream stat(proc_path(pid, "stat"));
  std::string line;
  if (!std::getline(stat, line)) return std::nullopt;
  // The command name (field 2) is in parentheses and may itself hold ") ": parse after the last.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  StatFields out;
  for (int n = 3; fields >> field; ++n) {
    if (n == 3) out.state = field.empty() ? '?' : field[0];
    if (n == 22) {
      out.start_ticks = std::stoull(field);
      return out;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<ProcessIdentity> read_process_identity(int pid) {
  if (pid <= 0) return std::nullopt;
  const std::optional<StatFields> stat = read_stat(pid);
  if (!stat || stat->state == 'Z' || stat->state == 'X' || stat->start_ticks == 0)
    return std::nullopt;
  ProcessIdentity id;
  id.pid = pid;
  id.start_ticks = stat->start_ticks;
  char target[4096];
  const ssize_t n = ::readlink(proc_path(pid, "exe").c_str(), target, sizeof target - 1);
  if (n <= 0) return std::nullopt;  // a kernel thread, or another user's process
  id.exe.assign(target, size_t(n));
  const size_t suffix = std::strlen(kDeleted);
  if (id.exe.size() > suffix && id.exe.compare(id.exe.size() - suffix, suffix, kDeleted) == 0) {
    id.exe.resize(id.exe.size() - suffix);
    id.exe_deleted = true;
  }
  return id;
}

bool has_exited(const ProcessIdentity& recorded) {
  const std::optional<StatFields> stat = read_stat(recorded.pid);
  return !stat || stat->state == 'Z' || stat->state == 'X' ||
         stat->start_ticks != recorded.start_ticks;
}

bool same_process(const ProcessIdentity& live, const ProcessIdentity& recorded) {
  return live.pid == recorded.pid && live.start_ticks == recorded.start_ticks &&
         !recorded.exe.empty() && live.exe == recorded.exe;
}

std::string executable_sha256(int pid) {
  std::ifstream in(proc_path(pid, "exe"), std::ios::binary);
  std::ostringstream bytes;
  if (!in || !(bytes << in.rdbuf()))
    throw Error(ErrorKind::kIo, "cannot read the executable of process " + std::to_string(pid));
  return sha256_hex(bytes.str());
}

std::string program_version(const std::string& program) {
  const std::string text = capture_stdout({program, "--version"}, std::chrono::seconds(10));
  std::istringstream lines(text);
  std::string first, line, commit;
  std::getline(lines, first);
  while (std::getline(lines, line))
    if (line.rfind("commit: ", 0) == 0) commit = line.substr(8);
  if (first.empty()) throw Error(ErrorKind::kIo, program + " --version printed nothing");
  return first + (commit.empty() ? "" : " (commit " + commit + ")");
}

bool signal_if_same(const ProcessIdentity& recorded, int signal) {
  const int pidfd = pidfd_open_for(recorded.pid);
  if (pidfd < 0 && errno != ENOSYS) return false;  // ESRCH: gone
  // With the pidfd held, the identity read next is the identity of the process it refers to.
  const std::optional<ProcessIdentity> live = read_process_identity(recorded.pid);
  bool sent = false;
  if (live && same_process(*live, recorded)) {
#ifdef SYS_pidfd_send_signal
    if (pidfd >= 0)
      sent = ::syscall(SYS_pidfd_send_signal, pidfd, signal, nullptr, 0) == 0;
    else
#endif
      sent = ::kill(recorded.pid, signal) == 0;  // a kernel without pidfds (before Linux 5.3)
  }
  if (pidfd >= 0) ::close(pidfd);
  return sent;
}

}  // namespace sparkglm::operator_tool
