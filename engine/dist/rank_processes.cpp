#include "engine/dist/rank_processes.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

#include "engine/core/error.h"

namespace sparkglm::dist {

namespace {

std::string ended(int rank, pid_t pid, int status) {
  const std::string who = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
  if (WIFEXITED(status)) return who + " exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return who + " was killed by signal " + std::to_string(WTERMSIG(status));
  return who + " stopped";
}

}  // namespace

std::vector<std::string> rank_args(const std::vector<std::string>& args, int rank, int port) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--rank" || a == "--master-port") {
      ++i;  // and its value
      continue;
    }
    if (a.rfind("--rank=", 0) == 0 || a.rfind("--master-port=", 0) == 0) continue;
    out.push_back(a);
  }
  out.insert(out.end(), {"--rank", std::to_string(rank), "--master-port", std::to_string(port)});
  return out;
}

RankProcesses::RankProcesses(const std::vector<std::string>& args, int world_size,
                             int master_port) {
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) throw Error(ErrorKind::kIo, "cannot resolve /proc/self/exe to start the ranks");
  exe[n] = '\0';
  const pid_t parent = ::getpid();
  for (int r = 1; r < world_size; ++r) {
    const std::vector<std::string> a = rank_args(args, r, master_port);
    std::vector<char*> argv{exe};
    for (const std::string& s : a) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) throw Error(ErrorKind::kIo, std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {  // only async-signal-safe calls until exec
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
      ::execv(exe, argv.data());
      ::_exit(127);
    }
    pids_.push_back(pid);
    statuses_.push_back(0);
  }
}

RankProcesses::~RankProcesses() {
  for (size_t i = 0; i < pids_.size(); ++i)
    if (pids_[i] > 0) {
      ::kill(pids_[i], SIGKILL);
      ::waitpid(pids_[i], nullptr, 0);
    }
}

std::string RankProcesses::exited() {
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (pids_[i] <= 0) continue;
    int status = 0;
    if (::waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
      if (first_exit_.empty()) first_exit_ = ended(int(i) + 1, pids_[i], status);
      statuses_[i] = status;
      pids_[i] = 0;
    }
  }
  return first_exit_;
}

bool RankProcesses::wait(std::chrono::milliseconds grace) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  auto running = [&] {
    exited();
    for (pid_t p : pids_)
      if (p > 0) return true;
    return false;
  };
  while (running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  bool clean = !running();
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (pids_[i] > 0) {
      ::kill(pids_[i], SIGKILL);
      ::waitpid(pids_[i], &statuses_[i], 0);
      pids_[i] = 0;
    }
    clean = clean && WIFEXITED(statuses_[i]) && WEXITSTATUS(statuses_[i]) == 0;
  }
  return clean;
}

}  // namespace sparkglm::dist
