#include "gates/speculation_bundle.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <utility>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/core/utc_time.h"
#include "gates/verdict_rederivation.h"
#include "harness/run_environment.h"
#include "receipts/bundle_file.h"
#include "receipts/bundle_writer.h"
#include "receipts/qualification_record.h"

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using receipts::Problems;

const std::string kManifest = "qualification.json: ";
const std::string kFolder = "speculation-bench/";
constexpr size_t kMaxFiles = 64;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string shown(const json& v) {
  const std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() > 160 ? text.substr(0, 157) + "..." : text;
}

std::string joined(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : ",") + v;
  return out;
}

// The distinct values of `field` over the files, in order.
template <typename Field>
std::vector<std::string> distinct(const std::vector<SpeculationBench>& benches, Field field) {
  std::vector<std::string> out;
  for (const SpeculationBench& b : benches)
    if (std::find(out.begin(), out.end(), field(b)) == out.end()) out.push_back(field(b));
  return out;
}

// The candidate: the binary and model of the bench files, as they say (one binary).
json candidate_identity(const std::vector<SpeculationBench>& benches) {
  for (const SpeculationBench& b : benches)
    if (b.binary_sha256 != benches[0].binary_sha256 || b.commit != benches[0].commit)
      throw Error(ErrorKind::kInvalidArgument,
                  "--speculation-bench: " + b.file + " and " + benches[0].file +
                      " come from different binaries (commit " + b.commit + " vs " +
                      benches[0].commit + ", binary_sha256 " + b.binary_sha256.substr(0, 12) +
                      " vs " + benches[0].binary_sha256.substr(0, 12) + ")");
  const auto configs = distinct(benches, [](const SpeculationBench& b) { return b.config_sha256; });
  return {
      {"label", "candidate"},
      {"commit", benches[0].commit},
      {"clean_tree", benches[0].clean_tree},
      {"binary_sha256", benches[0].binary_sha256},
      {"profile", ""},
      {"profile_sha256", ""},
      {"effective_config_sha256", ""},
      {"model",
       {{"preset", joined(distinct(benches, [](const SpeculationBench& b) { return b.model(); }))},
        {"config_sha256", configs.size() == 1 ? configs[0] : ""},
        {"weights",
         joined(distinct(benches, [](const SpeculationBench& b) { return b.weights; }))}}},
      {"device", joined(distinct(benches, [](const SpeculationBench& b) { return b.device; }))},
      {"args", json::array()}};
}

std::string target_text(const SpeculationTargets& t) {
  return "speculative decoding of " + t.checkpoint + " on " + t.device + ": at C" +
         std::to_string(t.concurrency) +
         (t.min_prompts ? " over " + std::to_string(*t.min_prompts) + " prompts a repetition"
                        : "") +
         " the best median decode tok/s with k >= 1 at least " + fmt("%.2fx", t.min_speedup) +
         " the k = 0 cell's of the same run, and greedy output byte-identical to k = 0 at every "
         "concurrency (G2.json speculation_targets)";
}

const std::vector<std::string> kStandingLimits = {
    "speculation_bench drives the ServingEngine in process (no HTTP, no tokenizer); the "
    "environment is the host that wrote this bundle, the device each number ran on is in its "
    "bench file",
    "the verifier judges the gate again from the carried bench files; that those files were "
    "measured rather than written rests on who ran the bench"};

}  // namespace

json write_speculation_bundle(const fs::path& out, const SpeculationRequest& r) {
  if (r.benches.empty())
    throw Error(ErrorKind::kInvalidArgument, "--speculation-bench: at least one file is needed");
  if (r.benches.size() > kMaxFiles)
    throw Error(ErrorKind::kInvalidArgument,
                "--speculation-bench: more than " + std::to_string(kMaxFiles) + " files");
  if (out.filename() != r.id || !receipts::is_bundle_id(r.id))
    throw Error(ErrorKind::kInvalidArgument,
                "--out: the folder's name must be the bundle's id \"" + r.id +
                    "\" (lowercase letters, digits, '.', '_' and '-')");
  std::vector<std::string> bytes;
  std::vector<SpeculationBench> benches;
  json files = json::array();
  for (size_t i = 0; i < r.benches.size(); ++i) {
    const std::string given = r.benches[i].string();
    bytes.push_back(read_speculation_bench_bytes(r.benches[i], "--speculation-bench"));
    benches.push_back(parse_speculation_bench_bytes(bytes.back(), given));
    // Named as the bundle carries it, so that the verifier's notes are the writer's.
    benches.back().file = kFolder + std::to_string(i + 1) + ".json";
    files.push_back(
        {{"path", benches.back().file}, {"sha256", sha256_hex(bytes.back())}, {"source", given}});
  }
  const json candidate = candidate_identity(benches);
  const GateDefinition g2 = load_gate(r.gates.string(), "G2");
  if (!g2.speculation_targets)
    throw Error(ErrorKind::kInvalidConfig,
                (r.gates / "G2.json").string() +
                    ": no \"speculation_targets\" to judge a speculation bench by");
  const SpeculationTargets& t = *g2.speculation_targets;
  std::vector<std::string> limits;
  const GateResult gate = judge_speculation(t, benches, &limits);
  limits.insert(limits.end(), r.notes.begin(), r.notes.end());
  limits.insert(limits.end(), kStandingLimits.begin(), kStandingLimits.end());
  receipts::BundleWriter bundle(out);
  for (size_t i = 0; i < benches.size(); ++i)
    bundle.add_bytes(benches[i].file, bytes[i], "metrics");
  const json record = {{"schema", receipts::kRecordSchema},
                       {"id", r.id},
                       {"title", r.title},
                       {"created_at", utc_now_iso8601()},
                       {"state", "measurement"},
                       {"level", "G2"},
                       {"target", target_text(t)},
                       {"change",
                        {{"class", "operator"},
                         {"option", nullptr},
                         {"baseline", nullptr},
                         {"candidate", candidate}}},
                       {"environment", harness::probe_environment()},
                       {"workloads", json::array()},
                       {"gates", json::array({gate.to_json()})},
                       {"metrics", speculation_metrics(benches)},
                       {"speculation", {{"targets", t.to_json()}, {"files", files}}},
                       {"limitations", limits}};
  return bundle.finish(record);
}

bool is_speculation_record(const json& record) {
  return record.is_object() && record.contains("speculation");
}

namespace {

// The carried files as the record lists them, read and parsed again; problems for any that is
// missing, changed or not listed. Empty when one cannot be read.
std::vector<SpeculationBench> carried_benches(const fs::path& bundle, const json& record,
                                              const json& s, Problems& p) {
  const json files = s.value("files", json());
  if (!files.is_array() || files.empty() || files.size() > kMaxFiles) {
    p.push_back({kManifest + "speculation.files",
                 "expected an array of 1.." + std::to_string(kMaxFiles) + " files"});
    return {};
  }
  std::set<std::string> listed;
  for (const json& a : record.value("artifacts", json::array()))
    if (a.is_object() && a.value("path", "").rfind(kFolder, 0) == 0) listed.insert(a["path"]);
  std::vector<SpeculationBench> benches;
  bool whole = true;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string at = kManifest + "speculation.files[" + std::to_string(i) + "]";
    const std::string want = kFolder + std::to_string(i + 1) + ".json";
    const std::string path = files[i].is_object() ? files[i].value("path", "") : "";
    if (path != want || !listed.count(path)) {
      p.push_back({at + ".path", "says " + shown(files[i].value("path", json())) + "; expected " +
                                     want + ", listed in artifacts"});
      whole = false;
      continue;
    }
    listed.erase(path);
    try {
      const std::string bytes = read_speculation_bench_bytes(bundle / path, "carried");
      if (files[i].value("sha256", "") != sha256_hex(bytes))
        p.push_back({at + ".sha256", "says " + shown(files[i].value("sha256", json())) +
                                         ", but the carried " + path + " hashes to " +
                                         sha256_hex(bytes)});
      benches.push_back(parse_speculation_bench_bytes(bytes, path));
    } catch (const std::exception& e) {
      p.push_back({path, std::string("cannot be judged again: ") + e.what()});
      whole = false;
    }
  }
  for (const std::string& path : listed)
    p.push_back({path, "carried, but not in qualification.json's speculation.files"});
  return whole ? benches : std::vector<SpeculationBench>{};
}

// The gate and its limitations under one definition's targets.
Problems judged_under(const SpeculationTargets& t, const std::string& sha256, const json& record,
                      const std::vector<SpeculationBench>& benches) {
  std::vector<std::string> limits;
  Problems p = compare_judged_gate(record["gates"][0], judge_speculation(t, benches, &limits),
                                   kManifest + "gates[0]", "the carried speculation_bench files");
  const json targets = record["speculation"].value("targets", json());
  if (!close_json(targets, t.to_json()))
    p.push_back({kManifest + "speculation.targets", "are not G2.json's speculation_targets " +
                                                        shown(t.to_json()) + " (sha256 " + sha256 +
                                                        ")"});
  const json recorded = record.value("limitations", json::array());
  for (const std::string& l : limits)
    if (std::find(recorded.begin(), recorded.end(), json(l)) == recorded.end())
      p.push_back({kManifest + "limitations", "lacks \"" + l + "\", which judging gives"});
  return p;
}

}  // namespace

Problems rederive_speculation(const fs::path& bundle, const json& record,
                              const std::vector<GateDefinition>& g2) {
  Problems p;
  const json s = record.value("speculation", json());
  if (!s.is_object()) return {{kManifest + "speculation", "expected an object"}};
  const json gates = record.value("gates", json::array());
  if (gates.size() != 1 || !gates[0].is_object() || gates[0].value("id", "") != "G2") {
    p.push_back({kManifest + "gates", "a speculation bundle holds one gate, G2; got " +
                                          std::to_string(gates.size()) + " gate(s)"});
    return p;
  }
  const std::vector<SpeculationBench> benches = carried_benches(bundle, record, s, p);
  if (benches.empty()) return p;
  try {
    const json candidate = candidate_identity(benches);
    const json recorded = record.value("change", json::object()).value("candidate", json());
    if (!close_json(recorded, candidate))
      p.push_back({kManifest + "change.candidate",
                   "says " + shown(recorded) + "; the carried files give " + shown(candidate)});
  } catch (const Error& e) {
    p.push_back({kManifest + "change.candidate", e.message()});
  }
  const json want = speculation_metrics(benches);
  const json got = record.value("metrics", json::array());
  if (got.size() != want.size())
    p.push_back({kManifest + "metrics", std::to_string(got.size()) +
                                            " metrics; the carried files give " +
                                            std::to_string(want.size())});
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    if (!close_json(got[i], want[i]))
      p.push_back({kManifest + "metrics[" + std::to_string(i) + "]",
                   "says " + shown(got[i]) + "; the carried files give " + shown(want[i])});
  // The current definition first, then the superseded ones: the first under which the recorded
  // gate, targets and limitations all re-derive is the one it was judged by.
  const Problems judged = under_first_definition(
      g2,
      [&](const GateDefinition& d) -> std::optional<Problems> {
        if (!d.speculation_targets) return std::nullopt;
        return judged_under(*d.speculation_targets, d.sha256, record, benches);
      },
      "speculation_targets");
  p.insert(p.end(), judged.begin(), judged.end());
  return p;
}

}  // namespace sparkglm::gates
