#include "reports/report_facts.h"

#include <cstdio>

#include "reports/bundle_view.h"

namespace sparkglm::reports {

namespace {

std::string gib(const nlohmann::json* bytes) {
  if (!bytes || !bytes->is_number() || bytes->get<double>() <= 0) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes->get<double>() / (1024.0 * 1024 * 1024));
  return buf;
}

std::string prefix(const std::string& hash, size_t n = 12) {
  return hash.size() > n ? hash.substr(0, n) : hash;
}

void add(std::vector<Fact>& facts, const std::string& label, const std::string& value) {
  if (!value.empty() && value != "-") facts.emplace_back(label, value);
}

std::string gpu_list(const nlohmann::json* gpus) {
  if (!gpus || !gpus->is_array() || gpus->empty()) return "none";
  std::vector<std::pair<std::string, int>> groups;  // "name (memory)" in order of appearance
  for (const nlohmann::json& gpu : *gpus) {
    std::string name = text_at(gpu, "name", "unknown GPU");
    const std::string memory = gib(find_path(gpu, "memory_bytes"));
    if (!memory.empty()) name += " (" + memory + ")";
    bool found = false;
    for (auto& [n, count] : groups)
      if (n == name) found = ++count > 0;
    if (!found) groups.emplace_back(name, 1);
  }
  std::string out;
  for (const auto& [name, count] : groups)
    out += (out.empty() ? "" : ", ") + std::to_string(count) + "x " + name;
  return out;
}

std::string arm_line(const nlohmann::json& arm) {
  std::string out = "commit " + prefix(text_at(arm, "commit"));
  const nlohmann::json* clean = find_path(arm, "clean_tree");
  if (clean && clean->is_boolean()) out += clean->get<bool>() ? " (clean)" : " (DIRTY tree)";
  out += ", binary " + prefix(text_at(arm, "binary_sha256"));
  const std::string profile = text_at(arm, "profile", "");
  out += ", profile " + (profile.empty() ? std::string("none") : profile);
  std::string model = text_at(arm, "model.preset", "");
  if (model.empty()) model = "config " + prefix(text_at(arm, "model.config_sha256"));
  const std::string weights = text_at(arm, "model.weights", "");
  if (!weights.empty()) model += " (" + weights + ")";
  out += ", model " + model;
  const std::string device = text_at(arm, "device", "");
  if (!device.empty()) out += ", device " + device;
  return out;
}

}  // namespace

std::string change_summary(const nlohmann::json& record) {
  std::string out = text_at(record, "change.class");
  const nlohmann::json* option = find_path(record, "change.option");
  if (option && option->is_object())
    out += ": " + text_at(*option, "name") + " = " + text_at(*option, "value");
  return out;
}

std::vector<Fact> system_facts(const nlohmann::json& record) {
  std::vector<Fact> facts;
  const nlohmann::json* env = find_path(record, "environment");
  if (!env) return facts;
  std::string host = text_at(*env, "host", "");
  const std::string os = text_at(*env, "os", "");
  if (!os.empty()) host += (host.empty() ? "" : ", ") + os;
  add(facts, "host", host);
  std::string cpu = text_at(*env, "cpu", "");
  const nlohmann::json* cores = find_path(*env, "cpu_cores");
  if (cores && cores->is_number()) cpu += ", " + display(cores) + " cores";
  const std::string memory = gib(find_path(*env, "memory_bytes"));
  if (!memory.empty()) cpu += ", " + memory;
  add(facts, "cpu", cpu);
  add(facts, "gpus", gpu_list(find_path(*env, "gpus")));
  std::string stack;
  for (const char* key : {"driver", "cuda", "nccl"}) {
    const std::string v = text_at(*env, key, "");
    if (!v.empty()) stack += (stack.empty() ? "" : ", ") + std::string(key) + " " + v;
  }
  add(facts, "stack", stack);
  add(facts, "compiler", text_at(*env, "compiler", ""));
  // The harness's own cost per SSE event, beside what it measured (QUALIFICATION.md: far below).
  const nlohmann::json* client = find_path(record, "client");
  if (client && client->is_object()) {
    const nlohmann::json* median = find_path(*client, "overhead_per_event_median_s");
    const nlohmann::json* max = find_path(*client, "overhead_per_event_max_s");
    if (median && median->is_number() && max && max->is_number()) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%.1f us per event (median), %.1f us max",
                    median->get<double>() * 1e6, max->get<double>() * 1e6);
      add(facts, "client", buf);
    }
  }
  return facts;
}

std::vector<Fact> arm_facts(const nlohmann::json& record) {
  std::vector<Fact> facts;
  for (const char* arm : {"candidate", "baseline"}) {
    const nlohmann::json* a = find_path(record, std::string("change.") + arm);
    if (a && a->is_object()) facts.emplace_back(arm, arm_line(*a));
  }
  return facts;
}

std::vector<std::string> criterion_lines(const nlohmann::json& gate) {
  std::vector<std::string> lines;
  const nlohmann::json* criteria = find_path(gate, "criteria");
  if (!criteria || !criteria->is_array()) return lines;
  for (const nlohmann::json& c : *criteria) {
    const nlohmann::json* pass = find_path(c, "pass");
    const std::string mark =
        pass && pass->is_boolean() ? (pass->get<bool>() ? "pass" : "FAIL") : "?";
    lines.push_back("[" + mark + "] " + text_at(c, "name") + ": observed " +
                    text_at(c, "observed") + ", threshold " + text_at(c, "threshold"));
  }
  return lines;
}

std::vector<std::string> limitations(const nlohmann::json& record) {
  std::vector<std::string> out;
  const nlohmann::json* list = find_path(record, "limitations");
  if (list && list->is_array())
    for (const nlohmann::json& l : *list) out.push_back(display(&l));
  return out;
}

std::vector<std::vector<std::string>> summary_rows(const nlohmann::json& record) {
  return {{"id", text_at(record, "id")},
          {"state", text_at(record, "state")},
          {"level", text_at(record, "level")},
          {"created", text_at(record, "created_at")},
          {"target", text_at(record, "target")},
          {"change", change_summary(record)},
          {"attestation", text_at(record, "attestation.status")}};
}

std::vector<std::vector<std::string>> system_rows(const nlohmann::json& record) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& [label, value] : system_facts(record)) rows.push_back({label, value});
  for (const auto& [label, value] : arm_facts(record)) rows.push_back({label, value});
  const nlohmann::json* workloads = find_path(record, "workloads");
  if (workloads && workloads->is_array())
    for (const nlohmann::json& w : *workloads)
      rows.push_back({"workload", text_at(w, "id") + ", scale " + text_at(w, "scale") +
                                      ", spec sha256 " + text_at(w, "spec_sha256")});
  return rows;
}

std::vector<std::vector<std::string>> gate_rows(const nlohmann::json& record) {
  std::vector<std::vector<std::string>> gates;
  const nlohmann::json* gate_list = find_path(record, "gates");
  if (gate_list && gate_list->is_array())
    for (const nlohmann::json& g : *gate_list) {
      std::string criteria;
      for (const std::string& c : criterion_lines(g))
        criteria += (criteria.empty() ? "" : "; ") + c;
      gates.push_back(
          {text_at(g, "id"), text_at(g, "status"), text_at(g, "summary", ""), criteria});
    }
  return gates;
}

}  // namespace sparkglm::reports
