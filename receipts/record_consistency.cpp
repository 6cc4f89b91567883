#include "receipts/record_consistency.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <optional>
#include <sstream>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/core/strict_json.h"
#include "harness/request_record.h"
#include "harness/statistics.h"
#include "receipts/bundle_file.h"

namespace sparkglm::receipts {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kManifest = "qualification.json: ";

std::string text_of(const json& obj, const char* key) {
  const auto it = obj.is_object() ? obj.find(key) : obj.end();
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Equal up to the last bits a decimal round trip may lose.
bool same(double a, double b) {
  return a == b || std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}

// The artifacts present and unchanged, the only ones read here.
struct Intact {
  const std::set<std::string>& paths;
  bool has(const std::string& path) const { return paths.count(path) > 0; }
};

void check_gates(const json& record, Problems& problems) {
  const auto gates = record.find("gates");
  if (gates == record.end() || !gates->is_array()) return;
  for (size_t i = 0; i < gates->size(); ++i) {
    const json& gate = (*gates)[i];
    const auto criteria = gate.is_object() ? gate.find("criteria") : gate.end();
    if (criteria == gate.end() || !criteria->is_array()) continue;
    const std::string at = kManifest + "gates[" + std::to_string(i) + "]";
    const std::string status = text_of(gate, "status");
    size_t failing = 0;
    for (size_t c = 0; c < criteria->size(); ++c) {
      const json& criterion = (*criteria)[c];
      if (!criterion.is_object() || !criterion.contains("pass") || criterion["pass"] == true)
        continue;
      ++failing;
      if (status == "pass")
        problems.push_back({at + ".criteria[" + std::to_string(c) + "].pass",
                            "gate " + text_of(gate, "id") + " is marked pass but criterion \"" +
                                text_of(criterion, "name") + "\" failed"});
    }
    if (status == "pass" && criteria->empty())
      problems.push_back({at + ".criteria", "gate " + text_of(gate, "id") +
                                                " is marked pass with no criterion: a pass names "
                                                "what it checked"});
    if (status == "fail" && failing == 0)
      problems.push_back({at + ".status", "gate " + text_of(gate, "id") +
                                              " is marked fail but no criterion failed"});
  }
}

// One side of a metric: median, min and max are those of its samples.
void check_side(const json& stats, const std::string& at, Problems& problems) {
  if (!stats.is_object()) return;
  const auto samples = stats.find("samples");
  for (const char* key : {"median", "min", "max"})
    if (!stats.contains(key) || !stats[key].is_number()) return;  // a record problem already
  const double median = stats["median"], lo = stats["min"], hi = stats["max"];
  if (!(lo <= median && median <= hi))
    problems.push_back({at + ".median", "median " + num(median) + " lies outside its min..max " +
                                            num(lo) + ".." + num(hi)});
  if (samples == stats.end() || !samples->is_array()) return;
  std::vector<double> xs;
  for (const json& s : *samples)
    if (s.is_number()) xs.push_back(s.get<double>());
  if (xs.size() != samples->size()) return;
  if (xs.empty()) return problems.push_back({at + ".samples", "empty: a summary needs samples"});
  harness::Summary s;
  try {
    s = harness::summarize(xs);
  } catch (const Error& e) {
    return problems.push_back({at + ".samples", e.message()});
  }
  const std::pair<const char*, double> recomputed[] = {
      {"median", s.median}, {"min", s.min}, {"max", s.max}};
  for (const auto& [key, value] : recomputed)
    if (!same(stats[key].get<double>(), value))
      problems.push_back({at + "." + key, "says " + num(stats[key].get<double>()) +
                                              ", its samples give " + num(value)});
}

void check_metrics(const json& record, Problems& problems) {
  const auto metrics = record.find("metrics");
  if (metrics == record.end() || !metrics->is_array()) return;
  for (size_t i = 0; i < metrics->size(); ++i) {
    const json& m = (*metrics)[i];
    if (!m.is_object()) continue;
    const std::string at = kManifest + "metrics[" + std::to_string(i) + "]";
    for (const char* side : {"baseline", "candidate"})
      if (m.contains(side)) check_side(m[side], at + "." + side, problems);
    const auto n = m.find("n");
    const auto cand = m.find("candidate");
    if (n != m.end() && n->is_number_integer() && cand != m.end() && cand->is_object() &&
        cand->contains("samples") && (*cand)["samples"].is_array() &&
        *n != (*cand)["samples"].size())
      problems.push_back({at + ".n", "says " + n->dump() + ", the candidate has " +
                                         std::to_string((*cand)["samples"].size()) + " samples"});
  }
}

void check_times(const json& record, Problems& problems) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  double created = 0;
  const std::string created_at = text_of(record, "created_at");
  const bool has_created = !created_at.empty() && parse_utc(created_at, &created);
  if (!created_at.empty() && !has_created)
    problems.push_back({kManifest + "created_at", "\"" + created_at + "\" is no UTC time"});
  if (has_created && created > now + kClockSkewS)
    problems.push_back({kManifest + "created_at",
                        "\"" + created_at + "\" lies in the future (this clock says it is " +
                            num(std::floor(now)) + " s since 1970, skew allowed " +
                            num(kClockSkewS) + " s)"});
  const auto attestation = record.find("attestation");
  const std::string date = attestation != record.end() ? text_of(*attestation, "date") : "";
  double signed_at = 0;
  if (date.empty()) return;
  if (!parse_utc(date, &signed_at))
    return problems.push_back({kManifest + "attestation.date", "\"" + date + "\" is no UTC time"});
  if (signed_at > now + kClockSkewS)
    problems.push_back({kManifest + "attestation.date", "\"" + date + "\" lies in the future"});
  if (has_created && signed_at < created)
    problems.push_back({kManifest + "attestation.date",
                        "\"" + date + "\" is before the record was created (" + created_at + ")"});
}

// Every request of requests.jsonl: parseable, and its times in the order they happen.
void check_requests(const fs::path& bundle, const Intact& intact, Problems& problems) {
  if (!intact.has("requests.jsonl")) return;
  std::istringstream lines(read_file(bundle / "requests.jsonl"));
  std::string line;
  for (size_t n = 1; std::getline(lines, line); ++n) {
    if (line.empty()) continue;
    const std::string at = "requests.jsonl: line " + std::to_string(n);
    harness::RequestRecord r;
    try {
      r = harness::record_from_json(parse_json_unique_keys(line, at, ErrorKind::kInvalidArgument));
    } catch (const Error& e) {
      problems.push_back({at, e.message()});
      continue;
    }
    // Checked in place: g++ 13 reports a false -Wstringop-overflow on a vector built from these.
    const auto finite = [](double t) { return std::isfinite(t); };
    const auto finite_or_absent = [](const std::optional<double>& t) {
      return !t || std::isfinite(*t);
    };
    if (!finite(r.start_s) || !finite(r.end_s) || !finite_or_absent(r.first_output_s) ||
        !finite_or_absent(r.first_visible_s) ||
        !std::all_of(r.output_event_s.begin(), r.output_event_s.end(), finite)) {
      problems.push_back({at, "a time that is not a finite number"});
      continue;
    }
    const auto inside = [&](double t) { return r.start_s <= t && t <= r.end_s; };
    if (r.start_s < 0) problems.push_back({at, "start_s " + num(r.start_s) + " is before the run"});
    if (r.end_s < r.start_s)
      problems.push_back({at, "end_s " + num(r.end_s) + " is before start_s " + num(r.start_s)});
    else if ((r.first_output_s && !inside(*r.first_output_s)) ||
             (r.first_visible_s && !inside(*r.first_visible_s)))
      problems.push_back({at, "a first output outside the request's start_s..end_s " +
                                  num(r.start_s) + ".." + num(r.end_s)});
    else if (!std::is_sorted(r.output_event_s.begin(), r.output_event_s.end()) ||
             !std::all_of(r.output_event_s.begin(), r.output_event_s.end(), inside))
      problems.push_back({at, "output_event_s out of order or outside start_s..end_s"});
  }
}

// An arm's artifacts say what change.<arm> says: identity.json is that object, and the
// effective configuration hashes (compact, keys sorted: what the server logs) to its
// effective_config_sha256.
void check_arms(const fs::path& bundle, const json& record, const Intact& intact,
                Problems& problems) {
  const auto change = record.find("change");
  if (change == record.end() || !change->is_object()) return;
  for (const char* arm : {"baseline", "candidate"}) {
    const auto identity = change->find(arm);
    if (identity == change->end() || !identity->is_object()) continue;
    const std::string dir = std::string("server/") + arm + "/";
    const std::string field = kManifest + "change." + arm;
    try {
      if (intact.has(dir + "effective-config.json")) {
        const std::string sha = sha256_hex(
            parse_json_unique_keys(read_file(bundle / (dir + "effective-config.json")),
                                   dir + "effective-config.json", ErrorKind::kInvalidArgument)
                .dump());
        if (sha != text_of(*identity, "effective_config_sha256"))
          problems.push_back({field + ".effective_config_sha256",
                              "\"" + text_of(*identity, "effective_config_sha256") + "\", but " +
                                  dir + "effective-config.json hashes to " + sha});
      }
      if (intact.has(dir + "identity.json") &&
          parse_json_unique_keys(read_file(bundle / (dir + "identity.json")), dir + "identity.json",
                                 ErrorKind::kInvalidArgument) != *identity)
        problems.push_back({field, "differs from " + dir + "identity.json"});
    } catch (const Error& e) {
      problems.push_back({dir, e.message()});
    }
  }
}

void check_workload_specs(const fs::path& bundle, const json& record, const Intact& intact,
                          Problems& problems) {
  const auto workloads = record.find("workloads");
  if (workloads == record.end() || !workloads->is_array()) return;
  for (size_t i = 0; i < workloads->size(); ++i) {
    const json& w = (*workloads)[i];
    const std::string id = text_of(w, "id"),
                      at = kManifest + "workloads[" + std::to_string(i) + "]";
    if (id.empty()) continue;
    const std::string path = "workloads/" + id + ".json";
    if (!intact.has(path)) {
      if (!fs::exists(bundle / path))
        problems.push_back(
            {at, "workload " + id + " ran, but its spec " + path + " is not in the bundle"});
      continue;
    }
    const std::string sha = digest_file(bundle / path).sha256;
    if (sha != text_of(w, "spec_sha256"))
      problems.push_back({at + ".spec_sha256", "\"" + text_of(w, "spec_sha256") + "\", but " +
                                                   path + " hashes to " + sha});
  }
}

}  // namespace

bool parse_utc(const std::string& text, double* seconds) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0, used = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &s, &used) !=
          6 ||
      used != 19)
    return false;
  double fraction = 0;
  const std::string rest = text.substr(19);
  if (rest != "Z") {
    if (rest.size() < 3 || rest[0] != '.' || rest.back() != 'Z') return false;
    const std::string digits = rest.substr(1, rest.size() - 2);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return false;
    fraction = std::stod("0." + digits);
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  const std::time_t t = timegm(&tm);
  // timegm normalises (February 30 -> March 2); a real time comes back unchanged.
  std::tm back{};
  gmtime_r(&t, &back);
  if (back.tm_year != y - 1900 || back.tm_mon != mo - 1 || back.tm_mday != d || back.tm_hour != h ||
      back.tm_min != mi || back.tm_sec != s)
    return false;
  *seconds = double(t) + fraction;
  return true;
}

Problems check_consistency(const fs::path& bundle, const json& record,
                           const std::set<std::string>& intact_paths) {
  Problems problems;
  if (!record.is_object()) return problems;
  const Intact intact{intact_paths};
  check_gates(record, problems);
  check_metrics(record, problems);
  check_times(record, problems);
  check_requests(bundle, intact, problems);
  check_arms(bundle, record, intact, problems);
  check_workload_specs(bundle, record, intact, problems);
  return problems;
}

}  // namespace sparkglm::receipts
