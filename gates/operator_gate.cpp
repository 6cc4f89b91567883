#include "gates/operator_gate.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <map>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "receipts/bundle_file.h"

extern char** environ;

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Whether a row passes one criterion field; error_ok compares error with tolerance.
bool row_passes(const json& row, const std::string& field) {
  if (field == "error_ok")
    return row.contains("error") && row.contains("tolerance") && row["error"].is_number() &&
           row["error"].get<double>() <= row["tolerance"].get<double>();
  return row.value(field, false) == true;
}

std::string row_name(const json& row) {
  return row.value("operator", "?") + " " + row.value("shape", "") + " rows " +
         std::to_string(row.value("rows", 0));
}

int run_runner(const fs::path& runner, const fs::path& out_file, std::ostream& err) {
  const std::string bin = runner.string(), flag = "--out", out = out_file.string();
  std::vector<char*> argv = {const_cast<char*>(bin.c_str()), const_cast<char*>(flag.c_str()),
                             const_cast<char*>(out.c_str()), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, bin.c_str(), nullptr, nullptr, argv.data(), environ) != 0)
    throw Error(ErrorKind::kIo, "cannot start the operator runner " + bin);
  int status = 0;
  waitpid(pid, &status, 0);
  err << "operator runner " << bin << " exited with status " << status << '\n';
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

std::vector<std::string> operator_table_limitations(const json& table) {
  struct Worst {
    int misses = 0, shapes = 0;
    double fraction = 1;
    std::string shape, note;
  };
  std::map<std::string, Worst> targets;  // by operator
  for (const json& row : table.value("operators", json::array())) {
    if (!row.contains("median_us") || !row.contains("floor_us") || !row["floor_us"].is_number())
      continue;
    const double floor = row["floor_us"].get<double>(), t = row["median_us"].get<double>();
    if (!(floor > 0 && t > 0)) continue;
    const double fraction = floor / t;
    const double target = row.value("floor_kind", "hbm") == "compute" ? 0.6 : 0.7;
    // The key is named first: a reference bound to operator[] of a temporary key makes g++ 13
    // warn (-Wdangling-reference), though it refers into the map.
    const std::string op = row.value("operator", "?");
    Worst& w = targets[op];
    ++w.shapes;
    if (fraction >= target) continue;
    ++w.misses;
    if (fraction < w.fraction)
      w = {w.misses, w.shapes, fraction,
           row.value("shape", "") + " rows " + std::to_string(row.value("rows", 0)),
           row.value("note", "")};
  }
  std::vector<std::string> out;
  char buf[64];
  for (const auto& [op, w] : targets) {
    if (w.misses == 0) continue;
    std::snprintf(buf, sizeof buf, "%.0f %%", 100 * w.fraction);
    out.push_back("G1 target missed: " + op + " below its floor target on " +
                  std::to_string(w.misses) + " of " + std::to_string(w.shapes) + " shapes, worst " +
                  buf + " of floor at " + w.shape + (w.note.empty() ? "" : " (" + w.note + ")"));
  }
  // Peers timed on the same (operator, shape): where the best peer is faster than our best row.
  std::map<std::pair<std::string, std::string>, double> ours;
  for (const json& row : table.value("operators", json::array()))
    if (row.contains("median_us")) {
      const auto key = std::make_pair(row.value("operator", ""), row.value("shape", ""));
      const double t = row["median_us"].get<double>();
      if (!ours.count(key) || t < ours[key]) ours[key] = t;
    }
  std::map<std::string, std::pair<int, int>> peers;             // peer -> (slower, compared)
  std::map<std::string, std::pair<double, std::string>> worst;  // peer -> (ratio, where)
  for (const json& peer : table.value("peers", json::array())) {
    const auto key = std::make_pair(peer.value("operator", ""), peer.value("shape", ""));
    if (!ours.count(key) || !peer.contains("median_us")) continue;
    const std::string name = peer.value("peer", "?");
    const double ratio = ours[key] / peer["median_us"].get<double>();
    ++peers[name].second;
    if (ratio <= 1) continue;
    ++peers[name].first;
    if (ratio > worst[name].first) worst[name] = {ratio, key.first + " " + key.second};
  }
  for (const auto& [name, counts] : peers) {
    if (counts.first == 0) continue;
    std::snprintf(buf, sizeof buf, "%.2fx", worst[name].first);
    out.push_back("G1 peer faster: " + name + " beats ours on " + std::to_string(counts.first) +
                  " of " + std::to_string(counts.second) + " shared shapes, worst ours " + buf +
                  " its time at " + worst[name].second);
  }
  return out;
}

GateResult judge_operator_table(const GateDefinition& definition, const json& table) {
  if (table.value("schema", "") != "sparkglm.operators/1" || !table.contains("operators") ||
      !table["operators"].is_array() || table["operators"].empty())
    throw Error(ErrorKind::kInvalidArgument,
                "operator table: expected schema \"sparkglm.operators/1\" with a non-empty "
                "\"operators\" array");
  const json& rows = table["operators"];
  GateResult result;
  result.id = definition.id;
  for (const Criterion& c : definition.criteria) {
    if (c.check != "operators")
      throw Error(ErrorKind::kInvalidConfig,
                  "G1 criterion " + c.name + ": expected check operators");
    int64_t failing = 0;
    std::string first;
    for (const json& row : rows)
      if (!row_passes(row, c.field) && ++failing == 1) first = "first: " + row_name(row);
    result.criteria.push_back(
        {c.name, std::to_string(failing) + " of " + std::to_string(rows.size()) + " rows fail",
         "0 rows fail", failing == 0, first});
  }
  int64_t timed = 0, within = 0;
  for (const json& row : rows)
    if (row.contains("median_us") && row.contains("floor_us") && row["floor_us"].is_number() &&
        row["floor_us"].get<double>() > 0) {
      ++timed;
      within += row["median_us"].get<double>() <= 1.0 / 0.7 * row["floor_us"].get<double>();
    }
  result.summary = std::to_string(rows.size()) + " operator rows; " + std::to_string(within) +
                   " of " + std::to_string(timed) +
                   " timed rows at >= 70 % of their floor (speed is reported, not gated: each "
                   "row's note says why it misses)";
  result.conclude();
  return result;
}

GateResult evaluate_operator_gate(const GateDefinition& definition, const fs::path& table,
                                  const fs::path& runner, bool gpu, receipts::BundleWriter& bundle,
                                  std::ostream& err) {
  std::string bytes;
  if (!table.empty()) {
    bytes = receipts::read_file(table);
    bundle.add_bytes("operators.json", bytes, "operators");
  } else if (gpu && !runner.empty() && fs::exists(runner)) {
    bundle.add_file("operators.json", "operators");
    const int code = run_runner(runner, bundle.where_is("operators.json"), err);
    if (!fs::exists(bundle.where_is("operators.json")))
      throw Error(ErrorKind::kIo, "the operator runner exited " + std::to_string(code) +
                                      " without writing its table");
    bytes = receipts::read_file(bundle.where_is("operators.json"));
  } else {
    // A bundle travels: name the runner relative to where the run started when it lies there,
    // not by this machine's absolute path.
    const fs::path shown = runner.lexically_proximate(fs::current_path());
    const bool inside = !shown.empty() && *shown.begin() != "..";
    return not_run(
        definition.id,
        gpu ? "no operator runner at " + (inside ? shown : runner).string() + " (build with CUDA)"
            : "needs a GPU for the CUDA operators (nvidia-smi found none); pass "
              "--operators FILE to judge a table made on a GPU machine");
  }
  return judge_operator_table(
      definition,
      parse_json(bytes, "the operator table", ErrorKind::kInvalidArgument, json_limits::kReceipt));
}

}  // namespace sparkglm::gates
