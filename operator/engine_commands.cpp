// `sparkglm start|stop|status|logs`: one local engine, tracked in the state folder.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/core/build_info.h"
#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "engine/options/api_key_source.h"
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

// The variable that carries a key given as `-- --api-key K` into the server's environment.
constexpr const char* kKeyVariable = "SPARKGLM_SERVE_API_KEY";

// Takes `--api-key K` / `--api-key=K` out of the flags for sparkglm-serve: a key in the server's
// argv is readable by every user (/proc/<pid>/cmdline) and would land in engine.json.
std::string take_inline_key(std::vector<std::string>& flags) {
  std::string key;
  std::vector<std::string> rest;
  for (size_t i = 0; i < flags.size(); ++i) {
    if (flags[i] == "--api-key") {
      if (i + 1 == flags.size())
        throw Error(ErrorKind::kInvalidArgument, "--api-key expects a value");
      key = flags[++i];
    } else if (flags[i].rfind("--api-key=", 0) == 0) {
      key = flags[i].substr(10);
    } else {
      rest.push_back(flags[i]);
    }
  }
  flags = std::move(rest);
  return key;
}

int start(const CliArgs& a, std::vector<std::string> passthrough) {
  a.allow_only({"--profile", "--profile-dir", "--state-dir", "--port", "--bind", "--wait",
                "--serve-binary", "--api-key-file", "--api-key-env"});
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
  for (const char* flag : {"--port", "--bind", "--api-key-env"})
    if (a.has(flag)) request.args.insert(request.args.end(), {flag, a.str(flag, "")});
  if (a.has("--api-key-file"))
    request.args.insert(request.args.end(),
                        {"--api-key-file", fs::absolute(a.str("--api-key-file", "")).string()});
  const std::string inline_key = take_inline_key(passthrough);
  request.args.insert(request.args.end(), passthrough.begin(), passthrough.end());
  // The same parse the server runs: a bad flag or profile, two key sources, an unreadable key
  // file or an unset variable are reported here, before any process.
  const EffectiveConfig config = parse_serve_args(request.args, store.dir());
  resolve_api_key({inline_key, config.str("api-key-file"), config.str("api-key-env")});
  if (!inline_key.empty()) {
    request.env.emplace_back(kKeyVariable, inline_key);
    request.args.insert(request.args.end(), {"--api-key-env", kKeyVariable});
    std::cerr << "sparkglm: the key given with --api-key goes to sparkglm-serve in its "
                 "environment ("
              << kKeyVariable
              << "), not in its argv; --api-key-file PATH or --api-key-env NAME keep it out of "
                 "this command's argv too\n";
  }
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
  std::cout << "sparkglm-serve is running: pid " << r.process.pid << ", listening on " << r.url
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

// The key the engine was started with, for /metrics: from its key file, or from the variable
// it names when this shell has it too. "" when it has none or this command cannot know it.
std::string engine_key(const EngineRecord& r) {
  const nlohmann::json& args = r.raw.contains("args") ? r.raw["args"] : nlohmann::json::array();
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    const std::string flag = args[i].is_string() ? args[i].get<std::string>() : "";
    const std::string value = args[i + 1].is_string() ? args[i + 1].get<std::string>() : "";
    try {
      if (flag == "--api-key-file") return resolve_api_key({"", value, ""});
      if (flag == "--api-key-env") return resolve_api_key({"", "", value});
    } catch (const Error&) {
      return "";
    }
  }
  return "";
}

// Why /health refused, from the server's error body (a device fault names the CUDA error): the
// server's own text, one line, bounded.
std::string health_reason(const HttpResult& health) {
  if (health.status == 200) return "";
  nlohmann::json body;
  try {
    body = parse_json(health.body, "/health", ErrorKind::kIo, json_limits::kServerReply);
  } catch (const Error&) {
    return "";  // not JSON (or not bounded): no reason to show
  }
  if (!body.is_object() || !body.contains("error") || !body["error"].is_object()) return "";
  const auto& e = body["error"];
  if (!e.contains("message") || !e["message"].is_string()) return "";
  const bool coded = e.contains("code") && e["code"].is_string();
  std::string m = coded ? e["code"].get<std::string>() + ": " : "";
  m += e["message"].get<std::string>();
  std::replace_if(
      m.begin(), m.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  return " (" + m.substr(0, 400) + ")";
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
  std::cout << "engine: running, pid " << r->process.pid
            << (r->started_at.empty() ? "" : ", started " + r->started_at) << "\n";
  // Recorded at start from the running executable itself (never from the log, which clients
  // write into); the process was just checked to be that executable.
  std::cout << "version: " << (r->version.empty() ? "unknown" : r->version) << "\n";
  std::cout << "binary: " << r->process.exe
            << (r->process.exe_deleted ? " (replaced on disk since it started)" : "")
            << (r->binary_sha256.empty() ? "" : ", sha256 " + r->binary_sha256) << "\n";
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
              << (health.status == 200 ? "ok" : "HTTP " + std::to_string(health.status))
              << health_reason(health) << "\n";
    const HttpResult metrics = http_get(r->url + "/metrics", limits, engine_key(*r));
    if (metrics.status != 200)
      std::cout << "pool: unknown (/metrics answered HTTP " << metrics.status << ")\n";
    const std::string m = metrics.status == 200 ? metrics.body : "";
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
  std::vector<std::string> passthrough(dashes == args.end() ? dashes : dashes + 1, args.end());
  const CliArgs a(own, {"--force"});
  if (!a.positional().empty())
    throw Error(ErrorKind::kInvalidArgument,
                "sparkglm " + command + ": unexpected argument \"" + a.positional()[0] + "\"");
  if (command != "start" && !passthrough.empty())
    throw Error(ErrorKind::kInvalidArgument, "sparkglm " + command + " takes no `--` flags");
  if (command == "start") return start(a, std::move(passthrough));
  if (command == "stop") return stop(a);
  if (command == "status") return status(a);
  if (command == "logs") return logs(a);
  throw Error(ErrorKind::kInvalidArgument, "unknown engine command \"" + command + "\"");
}

}  // namespace sparkglm::operator_tool
