#pragma once
// One local `sparkglm-serve` run in the background, tracked by files in a state folder:
//   engine.pid   the process id (removed when it stops or is found dead)
//   engine.json  pid, binary, arguments, profile, URL, start time, log path
//   engine.log   the server's stdout and stderr, appended across starts
// Only a process whose executable is sparkglm-serve is ever signalled: a pid file that outlived its
// process (and a pid the kernel reused) is stale and removed, never obeyed.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sparkglm::operator_tool {

// $XDG_STATE_HOME/sparkglm, else $HOME/.local/state/sparkglm, else .sparkglm in the working folder.
std::string default_state_dir();

struct EngineRecord {
  int pid = 0;
  std::string url;      // "http://127.0.0.1:8893" ("" until it listens)
  std::string profile;  // the profile's name and path, or "" when started without one
  std::string started_at;
  nlohmann::json raw;  // engine.json as written
};

struct StartRequest {
  std::string serve_binary;       // path to sparkglm-serve
  std::vector<std::string> args;  // its arguments
  std::string bind;               // from the effective config, for the port check
  int port = 0;                   // 0: the server picks one and logs it
  std::string profile;            // for the record
  double wait_s = 600.0;          // for /health
};

class EngineProcess {
 public:
  explicit EngineProcess(std::string state_dir);

  const std::string& state_dir() const { return state_dir_; }
  std::string log_path() const;
  // The running engine, or nullopt. Removes a stale pid file (and says so in `stale_note`).
  std::optional<EngineRecord> running(std::string* stale_note = nullptr) const;
  // Starts sparkglm-serve detached (own session, output to engine.log) and waits until /health
  // answers 200. Errors (kInvalidArgument): already running, the port taken; (kIo): the server
  // exited first (its last log lines quoted) or was not healthy within wait_s (left running).
  EngineRecord start(const StartRequest& request) const;
  // SIGTERM, then wait up to timeout_s for it to exit; with `force`, SIGKILL after that. Returns
  // false when it was not running. Throws Error(kIo) when it outlives the wait.
  bool stop(double timeout_s, bool force) const;
  // The last `lines` lines of engine.log (all when 0).
  std::string log_tail(size_t lines) const;

 private:
  std::string state_dir_;
};

// Whether `bind`:`port` can be bound right now (false: another process holds it).
bool port_is_free(const std::string& bind, int port);

}  // namespace sparkglm::operator_tool
