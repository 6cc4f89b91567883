#include "harness/run_environment.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "engine/core/build_info.h"

namespace sparkglm::harness {
namespace {

// stdout of a fixed command line (no user input reaches it), "" when it cannot run.
std::string command_output(const char* command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command, "r"), pclose);
  if (!pipe) return "";
  std::string out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe.get())) > 0) out.append(buf.data(), n);
  return out;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  while (!s.empty() && s.front() == ' ') s.erase(s.begin());
  return s;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return trim(line.substr(line.find(':') + 1));
  return "unknown";
}

int64_t memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:") return kib * 1024;
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::stringstream s(line);
  std::string part;
  while (std::getline(s, part, sep)) out.push_back(trim(part));
  return out;
}

}  // namespace

bool gpu_present() {
  return !trim(command_output("nvidia-smi -L 2>/dev/null")).empty();
}

nlohmann::json probe_environment() {
  nlohmann::json env;
  std::array<char, 256> host{};
  gethostname(host.data(), host.size() - 1);
  env["host"] = host.data();
  utsname u{};
  uname(&u);
  env["os"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  env["cpu"] = cpu_model();
  env["cpu_cores"] = std::thread::hardware_concurrency();
  env["memory_bytes"] = memory_bytes();
  nlohmann::json gpus = nlohmann::json::array();
  std::string driver;
  const std::string smi = command_output(
      "nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm,"
      "clocks.mem --format=csv,noheader,nounits 2>/dev/null");
  std::stringstream lines(smi);
  std::string line;
  while (std::getline(lines, line)) {
    const auto f = split(line, ',');
    if (f.size() < 6) continue;
    driver = f[2];
    gpus.push_back({{"name", f[0]},
                    {"memory_bytes", std::strtoll(f[1].c_str(), nullptr, 10) * 1024 * 1024},
                    {"clocks", "sm " + f[3] + " MHz (max " + f[4] + "), mem " + f[5] + " MHz"}});
  }
  env["gpus"] = gpus;
  env["driver"] = driver;
  const BuildInfo& b = build_info();
  env["cuda"] = b.cuda_version[0] ? b.cuda_version : "not built";
  env["nccl"] = b.nccl_version[0] ? b.nccl_version : "not built";
  env["compiler"] = b.compiler;
  return env;
}

}  // namespace sparkglm::harness
