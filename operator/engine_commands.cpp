// `sparkglm start|stop|status|logs`: one local engine, tracked in the state folder.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "engine/core/build_info.h"
#include "engine/core/error.h"
#include "engine/options/effective_config.h"
#include "operator/commands.h"
#include "operator/engine_process.h"
#include "operator/http_get.h"

namespace sparkglm::operator_tool {

namespace fs = std::filesystem;

namespace {

// Exit status of `status` when no engine runs, as LSB init scripts use it.
constexpr int kNotRunning = 3;

std::string serve_binary(const CliArgs& a) {
  if (a.has("--serve-binary")) return a.str("--serve-binary", "");
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / "sparkglm-serve").string();
}

int start(const CliArgs& a, const std::vector<std::string>& passthrough) {
  a.allow_only({"--profile", "--profile-dir", "--state-dir", "--port", "--bind", "--wait",
                "--serve-binary"});
  const ProfileStore store = store_from(a);
  const std::string profile = a.has("--profile") ? a.str("--profile", "") : store.used();
  if (profile.empty() && passthrough.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "no profile: pass --profile NAME, choose one with `sparkglm profile use NAME`, "
                "or give sparkglm-serve's flags after `--`");
  StartRequest request;
  std::string profile_label;
  if (!profile.empty()) {
    const std::string path = fs::absolute(store.resolve(profile)).lexically_normal().string();
    request.args = {"--profile", path};
    profile_label = profile + " (" + path + ")";
  }
  for (const char* flag : {"--port", "--bind"})
    if (a.has(flag)) request.args.insert(request.args.end(), {flag, a.str(flag, "")});
  request.args.insert(request.args.end(), passthrough.begin(), passthrough.end());
  // The same parse the server runs: a bad flag or profile is reported here, before any process.
  const EffectiveConfig config = parse_serve_args(request.args, store.dir());
  request.serve_binary = serve_binary(a);
  request.bind = config.str("bind");
  request.port = int(config.integer("port"));
  request.profile = profile_label;
  request.wait_s = double(a.integer("--wait", 600, 1, 86400));
  const EngineProcess engine(state_dir_from(a));
  std::string stale;
  engine.running(&stale);
  if (!stale.empty()) std::cout << stale << "\n";
  const EngineRecord r = engine.start(request);
  std::cout << "sparkglm-serve is running: pid " << r.pid << ", listening on " << r.url
            << (profile_label.empty() ? "" : ", profile " + profile_label)
            << "\nlog: " << engine.log_path() << "\n";
  return 0;
}

int stop(const CliArgs& a) {
  a.allow_only({"--state-dir", "--timeout", "--force"});
  const EngineProcess engine(state_dir_from(a));
  std::string stale;
  engine.running(&stale);
  if (!stale.empty()) std::cout << stale << "\n";
  const double timeout = double(a.integer("--timeout", 60, 1, 3600));
  if (!engine.stop(timeout, a.has("--force"))) {
    std::cout << "the engine is not running (no live sparkglm-serve recorded in "
              << engine.state_dir() << ")\n";
    return 0;
  }
  std::cout << "stopped\n";
  return 0;
}

// The value of an unlabelled Prometheus sample, or -1.
double metric(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + " ", 0) == 0) return std::atof(line.c_str() + name.size() + 1);
  }
  return -1.0;
}

// The "sparkglm-serve VERSION (COMMIT)" line of the run's log.
std::string engine_version(const std::string& log) {
  const size_t at = log.rfind("sparkglm-serve ");
  if (at == std::string::npos) return "";
  const size_t end = log.find('\n', at);
  return log.substr(at, end == std::string::npos ? end : end - at);
}

int status(const CliArgs& a) {
  a.allow_only({"--state-dir"});
  const EngineProcess engine(state_dir_from(a));
  std::cout << "sparkglm " << build_info().version << " (" << build_info().commit << ")\n";
  std::string stale;
  const auto r = engine.running(&stale);
  if (!stale.empty()) std::cout << stale << "\n";
  if (!r) {
    std::cout << "engine: not running (state " << engine.state_dir() << ")\n";
    return kNotRunning;
  }
  std::cout << "engine: running, pid " << r->pid
            << (r->started_at.empty() ? "" : ", started " + r->started_at) << "\n";
  if (const std::string v = engine_version(engine.log_tail(0)); !v.empty())
    std::cout << "version: " << v << "\n";
  std::cout << "profile: " << (r->profile.empty() ? "(none)" : r->profile) << "\n";
  if (r->url.empty()) {
    std::cout << "health: starting (not listening yet)\n";
    return 1;
  }
  std::cout << "listening: " << r->url << "\n";
  HttpLimits limits;
  limits.timeout_s = 5.0;
  limits.max_bytes = 4 << 20;
  try {
    const HttpResult health = http_get(r->url + "/health", limits);
    std::cout << "health: "
              << (health.status == 200 ? "ok" : "HTTP " + std::to_string(health.status)) << "\n";
    const std::string m = http_get(r->url + "/metrics", limits).body;
    const double used = metric(m, "sparkglm_kv_blocks_used"),
                 total = metric(m, "sparkglm_kv_blocks_total");
    if (total > 0) {
      char line[160];
      std::snprintf(line, sizeof line,
                    "pool: %.0f of %.0f KV blocks in use (%.1f%%); requests running %.0f, "
                    "waiting %.0f\n",
                    used, total, 100.0 * used / total, metric(m, "sparkglm_num_requests_running"),
                    metric(m, "sparkglm_num_requests_waiting"));
      std::cout << line;
    }
    return health.status == 200 ? 0 : 1;
  } catch (const Error& e) {
    std::cout << "health: no answer (" << e.message() << ")\n";
    return 1;
  }
}

int logs(const CliArgs& a) {
  a.allow_only({"--state-dir", "--lines"});
  const EngineProcess engine(state_dir_from(a));
  const std::string text = engine.log_tail(size_t(a.integer("--lines", 100, 0, 1 << 30)));
  if (text.empty()) {
    std::cout << "no log yet in " << engine.log_path() << "\n";
    return 0;
  }
  std::cout << text;
  return 0;
}

}  // namespace

int engine_command(const std::string& command, const std::vector<std::string>& args) {
  // Flags after `--` go to sparkglm-serve unchanged.
  const auto dashes = std::find(args.begin(), args.end(), "--");
  const std::vector<std::string> own(args.begin(), dashes);
  const std::vector<std::string> passthrough(dashes == args.end() ? dashes : dashes + 1,
                                             args.end());
  const CliArgs a(own, {"--force"});
  if (!a.positional().empty())
    throw Error(ErrorKind::kInvalidArgument,
                "sparkglm " + command + ": unexpected argument \"" + a.positional()[0] + "\"");
  if (command != "start" && !passthrough.empty())
    throw Error(ErrorKind::kInvalidArgument, "sparkglm " + command + " takes no `--` flags");
  if (command == "start") return start(a, passthrough);
  if (command == "stop") return stop(a);
  if (command == "status") return status(a);
  if (command == "logs") return logs(a);
  throw Error(ErrorKind::kInvalidArgument, "unknown engine command \"" + command + "\"");
}

}  // namespace sparkglm::operator_tool
