#pragma once
// One local `sparkglm-serve` run in the background, tracked by files in a private state folder
// (StateFolder: 0700, files 0600):
//   engine.pid   the process id (removed when it stops or is found dead)
//   engine.json  the process's identity (pid, start time, executable path and sha256, the version
//                that executable reports), its arguments with secrets redacted, profile, URL,
//                start time, log path
//   engine.log   the server's stdout and stderr, appended across starts
// A process is the engine only while it is the one recorded at start (same pid, same start time,
// same executable: ProcessIdentity); anything else behind a pid file, including a process that
// merely calls itself sparkglm-serve, is stale and never signalled. Every command that reads the
// record and acts on it holds the folder's lock, so concurrent starts launch one server.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/process_identity.h"
#include "operator/state_folder.h"

namespace sparkglm::operator_tool {

// $XDG_STATE_HOME/sparkglm, else $HOME/.local/state/sparkglm, else .sparkglm in the working folder.
std::string default_state_dir();

struct EngineRecord {
  ProcessIdentity process;
  std::string binary_sha256;  // of the running executable, read through /proc/<pid>/exe
  std::string version;        // what that executable printed for --version at start
  std::string url;            // "http://127.0.0.1:8893" ("" until it listens)
  std::string profile;        // the profile's name and path, or "" when started without one
  std::string started_at;
  nlohmann::json raw;  // engine.json as written
};

struct StartRequest {
  std::string serve_binary;       // path to sparkglm-serve
  std::vector<std::string> args;  // its arguments (never a secret: they are readable in /proc)
  // Variables added to the server's environment only (the API key, named by --api-key-env).
  std::vector<std::pair<std::string, std::string>> env;
  std::string bind;       // from the effective config, for the port check
  int port = 0;           // 0: the server picks one and logs it
  std::string profile;    // for the record
  double wait_s = 600.0;  // for /health
};

class EngineProcess {
 public:
  explicit EngineProcess(std::string state_dir);

  const std::string& state_dir() const { return state_.dir(); }
  std::string log_path() const;
  // The running engine, or nullopt; takes the folder's lock. Removes a stale pid file (and says
  // why in `stale_note`).
  std::optional<EngineRecord> running(std::string* stale_note = nullptr) const;
  // Under the folder's lock: refuses when an engine runs, launches sparkglm-serve detached (own
  // session, output to engine.log), records its identity. Then waits until /health answers 200.
  // Errors (kInvalidArgument): already running, the port taken; (kIo): the server exited first
  // (its last log lines quoted) or was not healthy within wait_s (left running).
  EngineRecord start(const StartRequest& request) const;
  // Under the folder's lock: SIGTERM to the recorded process, then wait up to timeout_s for it to
  // exit; with `force`, SIGKILL after that. Returns false when it was not running. Throws
  // Error(kIo) when it outlives the wait.
  bool stop(double timeout_s, bool force) const;
  // The last `lines` lines of engine.log (all when 0).
  std::string log_tail(size_t lines) const;

 private:
  std::optional<EngineRecord> running_locked(std::string* stale_note) const;

  StateFolder state_;
};

// Whether `bind`:`port` can be bound right now (false: another process holds it).
bool port_is_free(const std::string& bind, int port);

}  // namespace sparkglm::operator_tool
