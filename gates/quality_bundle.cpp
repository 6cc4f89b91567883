#include "gates/quality_bundle.h"

#include <cstdint>
#include <ctime>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/core/build_info.h"
#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/core/strict_json.h"
#include "engine/core/utc_time.h"
#include "gates/case_metrics.h"
#include "gates/quality_gate.h"
#include "gates/verdict_rederivation.h"
#include "harness/run_environment.h"
#include "harness/server_identity.h"
#include "receipts/bundle_file.h"
#include "receipts/bundle_writer.h"
#include "receipts/qualification_record.h"
#include "workloads/workload_spec.h"

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using receipts::Problems;

const std::string kManifest = "qualification.json: ";
constexpr const char* kScores = "heldout-scores.json";
constexpr const char* kScoresSchema = "sparkglm.heldout_scores/1";
constexpr const char* kTrainingSchema = "sparkglm.tinyglm_training/1";

// The checkpoint's files a bundle carries: the name the record binds, where the bundle holds it.
struct Carried {
  const char* name;
  const char* path;
  const char* kind;
};
constexpr Carried kCarried[] = {{"config.json", "inputs/config.json", "config"},
                                {"training.json", "inputs/training.json", "config"},
                                {"heldout.json", "inputs/heldout.json", "workload"}};

Error refused(const std::string& what) {
  return Error(ErrorKind::kInvalidArgument, what);
}

std::string shown(const json& v) {
  const std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() > 160 ? text.substr(0, 157) + "..." : text;
}

// A member of `j` of the wanted type, or Error naming `where`.key.
const json& member(const json& j, std::string_view where, const char* key, json::value_t type,
                   const char* expected) {
  const std::string at = where.empty() ? key : std::string(where) + "." + key;
  if (!j.is_object() || !j.contains(key)) throw refused(at + ": missing");
  const json& v = j[key];
  const bool ok = type == json::value_t::number_float ? v.is_number() : v.type() == type;
  if (!ok) throw refused(at + ": expected " + expected + ", got " + shown(v));
  return v;
}
const std::string& text(const json& j, std::string_view where, const char* key) {
  return member(j, where, key, json::value_t::string, "a string").get_ref<const std::string&>();
}
const json& object(const json& j, std::string_view where, const char* key) {
  return member(j, where, key, json::value_t::object, "an object");
}
double number(const json& j, std::string_view where, const char* key) {
  return member(j, where, key, json::value_t::number_float, "a number").get<double>();
}
int64_t count(const json& j, std::string_view where, const char* key) {
  const json& v = member(j, where, key, json::value_t::number_float, "a number");
  if (!v.is_number_integer() || v.get<int64_t>() < 0)
    throw refused(std::string(where) + "." + key + ": expected a non-negative integer, got " +
                  shown(v));
  return v.get<int64_t>();
}

json read_json(const fs::path& path) {
  return parse_json_unique_keys(receipts::read_file(path), path.string(),
                                ErrorKind::kInvalidArgument);
}

// The weights identity the engine states for a checkpoint of one shard (Checkpoint::identity).
std::string loaded_identity(const std::string& shard, const std::string& sha256) {
  return "sha256:" + shard + "=" + sha256;
}

// training.json's bindings; errors name the file.
TrainedCheckpoint parse_training(const json& t, const std::string& name) {
  if (!t.is_object() || t.value("schema", "") != kTrainingSchema)
    throw refused(name + ": expected \"schema\": \"" + kTrainingSchema + "\"");
  TrainedCheckpoint c;
  c.shard_sha256 = text(t, name, "shard_sha256");
  c.weights_identity = text(t, name, "weights_identity");
  const json& sources = object(t, name, "sources_sha256");
  if (sources.empty()) throw refused(name + ".sources_sha256: no training source is bound");
  for (const auto& [path, sha] : sources.items()) {
    if (!sha.is_string() || !receipts::is_sha256_hex(sha))
      throw refused(name + ".sources_sha256." + path + ": expected 64 lowercase hex digits");
    c.sources_sha256[path] = sha;
  }
  return c;
}

// The scores of heldout-scores.json, as TaskLoss rows; errors name the file and field.
std::vector<harness::TaskLoss> parse_task_scores(const json& s) {
  std::vector<harness::TaskLoss> tasks;
  for (const auto& [name, t] : object(s, kScores, "tasks").items()) {
    const std::string at = std::string(kScores) + ".tasks." + name;
    harness::TaskLoss l;
    l.task = name;
    l.examples = int(count(t, at, "examples"));
    l.exact = int(count(t, at, "exact"));
    l.tokens = count(t, at, "tokens");
    l.nll = number(t, at, "nll");
    l.accuracy = number(t, at, "accuracy");
    tasks.push_back(l);
  }
  return tasks;
}

// The bindings: the carried files' checksums, training.json's shard, sources and identity.
void check_bindings(const fs::path& bundle, const json& record, const json& q, Problems& p) {
  const json& files = object(q, "quality", "files");
  for (const Carried& c : kCarried) {
    const std::string at = kManifest + "quality.files." + c.name;
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(bundle / c.path, ec))) {
      p.push_back(
          {c.path, "missing: a quality bundle carries the " + std::string(c.name) + " it binds"});
      continue;
    }
    const std::string sha = receipts::digest_file(bundle / c.path).sha256;
    if (!files.contains(c.name) || files[c.name] != sha)
      p.push_back({at, "says " + shown(files.value(c.name, json())) + ", but the carried " +
                           c.path + " hashes to " + sha});
  }
  const TrainedCheckpoint t =
      parse_training(read_json(bundle / "inputs/training.json"), "inputs/training.json");
  const json& weights = object(q, "quality", "weights");
  if (text(weights, "quality.weights", "shard_sha256") != t.shard_sha256)
    p.push_back({kManifest + "quality.weights.shard_sha256",
                 "says " + weights["shard_sha256"].get<std::string>() +
                     ", but inputs/training.json binds the shard " + t.shard_sha256});
  if (text(weights, "quality.weights", "identity") != t.weights_identity)
    p.push_back({kManifest + "quality.weights.identity", "says " + shown(weights["identity"]) +
                                                             ", but inputs/training.json names " +
                                                             shown(t.weights_identity)});
  const json& model = object(object(object(record, "", "change"), "change", "candidate"),
                             "change.candidate", "model");
  const std::string loaded =
      loaded_identity(text(weights, "quality.weights", "shard"), t.shard_sha256);
  if (text(model, "change.candidate.model", "weights") != loaded)
    p.push_back({kManifest + "change.candidate.model.weights",
                 "says " + shown(model["weights"]) +
                     ", but the shard inputs/training.json binds "
                     "loads as " +
                     shown(loaded)});
  const json& sources = object(q, "quality", "sources_sha256");
  if (sources != json(t.sources_sha256))
    p.push_back({kManifest + "quality.sources_sha256",
                 "is not what inputs/training.json records: " + shown(json(t.sources_sha256))});
}

// The scores against the carried held-out set, the engine settings and the metrics; returns the
// set's loss derived from the per-task scores.
harness::HeldoutLoss check_scores(const fs::path& bundle, const json& record, const json& q,
                                  Problems& p) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(bundle / kScores, ec)))
    throw refused(std::string(kScores) + ": missing: the raw record of a quality bundle");
  const json s = read_json(bundle / kScores);
  if (s.value("schema", "") != kScoresSchema)
    throw refused(std::string(kScores) + ": expected \"schema\": \"" + kScoresSchema + "\"");
  const harness::HeldoutSet set =
      harness::read_heldout((bundle / "inputs/heldout.json").string(),
                            std::numeric_limits<int>::max(), std::numeric_limits<int64_t>::max());
  if (text(s, kScores, "generator") != set.generator)
    p.push_back({kScores, "generator " + shown(s["generator"]) +
                              ", but the carried held-out set's is " + shown(set.generator)});
  const json& engine = object(q, "quality", "engine");
  if (object(s, kScores, "engine") != engine)
    p.push_back({kManifest + "quality.engine",
                 "is not heldout-scores.json's engine " + shown(s["engine"])});
  const json& candidate = object(object(record, "", "change"), "change", "candidate");
  if (text(engine, "quality.engine", "device") != text(candidate, "change.candidate", "device"))
    p.push_back({kManifest + "change.candidate.device", "says " + shown(candidate["device"]) +
                                                            ", but the scores ran on " +
                                                            shown(engine["device"])});
  // What the held-out set holds, task by task: examples and reply tokens.
  std::map<std::string, std::pair<int, int64_t>> held;
  for (const harness::HeldoutExample& x : set.examples) {
    held[x.task].first += 1;
    held[x.task].second += int64_t(x.tokens.size()) - x.reply_from;
  }
  const harness::HeldoutLoss derived = harness::HeldoutLoss::of_tasks(parse_task_scores(s));
  std::set<std::string> scored;
  for (const harness::TaskLoss& l : derived.tasks) {
    scored.insert(l.task);
    const auto it = held.find(l.task);
    if (it == held.end())
      p.push_back({kScores, "task " + l.task + " is scored, but the held-out set has none"});
    else if (it->second != std::make_pair(l.examples, l.tokens))
      p.push_back({kScores, "task " + l.task + ": " + std::to_string(l.examples) + " examples, " +
                                std::to_string(l.tokens) +
                                " reply tokens; the held-out set holds " +
                                std::to_string(it->second.first) + " and " +
                                std::to_string(it->second.second)});
  }
  for (const auto& [task, n] : held)
    if (!scored.count(task))
      p.push_back({kScores, "task " + task + " of the held-out set is not scored"});
  for (const char* mean : {"nll", "accuracy"})
    if (!close_json(s.value(mean, json()), derived.to_json()[mean]))
      p.push_back({std::string(kScores) + ": " + mean, "says " + shown(s.value(mean, json())) +
                                                           "; the mean over its tasks is " +
                                                           shown(derived.to_json()[mean])});
  const json want = quality_metrics(derived);
  const json got = record.value("metrics", json::array());
  if (got.size() != want.size())
    p.push_back({kManifest + "metrics", std::to_string(got.size()) + " metrics; " + kScores +
                                            " gives " + std::to_string(want.size())});
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    if (!close_json(got[i], want[i]))
      p.push_back({kManifest + "metrics[" + std::to_string(i) + "]",
                   "says " + shown(got[i]) + "; " + kScores + " gives " + shown(want[i])});
  return derived;
}

// The probes' grades, graded again from requests.jsonl and the carried workload, with what the
// record says they were; nullopt when the record has no probes.
struct ProbeGrades {
  std::vector<workloads::GradeResult> grades;
  json recorded;
};
std::optional<ProbeGrades> probe_grades(const fs::path& bundle, const json& q, Problems& p) {
  if (!q.contains("probes") || q["probes"].is_null()) return std::nullopt;
  const json& probes = object(q, "quality", "probes");
  const std::string& id = text(probes, "quality.probes", "workload");
  if (!receipts::is_bundle_id(id)) throw refused("quality.probes.workload: not a workload id");
  const fs::path file = bundle / "inputs" / (id + ".json");
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(file, ec)))
    throw refused("inputs/" + id + ".json: missing: the probes workload the bundle graded");
  const workloads::WorkloadSpec spec = workloads::load_workload(file.string());
  if (text(probes, "quality.probes", "workload_sha256") != spec.sha256)
    p.push_back({kManifest + "quality.probes.workload_sha256",
                 "says " + shown(probes["workload_sha256"]) + ", but inputs/" + id +
                     ".json hashes to " + spec.sha256});
  // The probes ran on the engine the held-out loss was scored on. The server's flags are the
  // record's: a flag the argv lacks is the server's default (precision_mode strict; bundles before
  // it was recorded have neither).
  const json& engine = object(q, "quality", "engine");
  const json& argv = member(probes, "quality.probes", "server", json::value_t::array, "an array");
  for (const auto& [flag, key, missing] :
       {std::tuple{"--device", "device", ""}, std::tuple{"--kv-cache-dtype", "kv_cache_dtype", ""},
        std::tuple{"--precision-mode", "precision_mode", "strict"}}) {
    json given = missing;
    for (size_t i = 0; i + 1 < argv.size(); ++i)
      if (argv[i] == flag) given = argv[i + 1];
    const json want = engine.value(key, json(missing));
    if (given != want)
      p.push_back({kManifest + "quality.probes.server",
                   std::string("ran ") + flag + " " + shown(given) +
                       ", but the held-out loss was scored with " + key + " " + shown(want)});
  }
  if (!fs::is_regular_file(fs::symlink_status(bundle / "requests.jsonl", ec)))
    throw refused("requests.jsonl: missing: the probes' records");
  return ProbeGrades{grade_probes(spec, read_requests(bundle)),
                     member(probes, "quality.probes", "grades", json::value_t::array, "an array")};
}

}  // namespace

TrainedCheckpoint check_trained_checkpoint(const fs::path& dir, const fs::path& root) {
  const fs::path record = dir / "training.json";
  std::error_code ec;
  if (!fs::is_regular_file(record, ec))
    throw refused(record.string() +
                  ": missing; a quality bundle binds trained weights, whose training.json records "
                  "the shard's and the training sources' sha256");
  TrainedCheckpoint c = parse_training(read_json(record), record.string());
  std::vector<fs::path> shards;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file() && entry.path().extension() == ".safetensors")
      shards.push_back(entry.path());
  if (shards.size() != 1)
    throw refused(dir.string() + ": " + std::to_string(shards.size()) +
                  " safetensors shards; training.json binds one (shard_sha256)");
  c.shard = shards[0].filename().string();
  const std::string shard_sha = harness::file_sha256(shards[0].string());
  if (shard_sha != c.shard_sha256)
    throw refused(shards[0].string() + ": sha256 " + shard_sha + ", but " + record.string() +
                  " records " + c.shard_sha256 + ": the weights are not the ones trained");
  for (const auto& [path, sha] : c.sources_sha256) {
    std::string why;
    if (!receipts::is_artifact_path(path, &why))
      throw refused(record.string() + ".sources_sha256: \"" + path +
                    "\" is not a path inside the repository (" + why + ")");
    const fs::path file = root / path;
    if (!fs::is_regular_file(file, ec))
      throw refused(path + ": missing (under " + root.string() + "), but " + record.string() +
                    " records its sha256 " + sha);
    const std::string got = harness::file_sha256(file.string());
    if (got != sha)
      throw refused(path + ": sha256 " + got + ", but " + record.string() + " records " + sha +
                    ": the training source changed since the weights were trained");
  }
  return c;
}

json quality_metrics(const harness::HeldoutLoss& scores) {
  json out = json::array();
  const auto add = [&](const std::string& which, double nll, double accuracy) {
    out.push_back(
        metric_to_json({"heldout_nll", "nats/token", "heldout", which, false, {}, {nll}}, 5.0));
    out.push_back(metric_to_json(
        {"heldout_token_accuracy", "fraction", "heldout", which, true, {}, {accuracy}}, 5.0));
  };
  for (const harness::TaskLoss& l : scores.tasks) add(l.task, l.nll, l.accuracy);
  add("mean", scores.nll, scores.accuracy);
  return out;
}

json write_quality_bundle(const fs::path& out, const QualityRun& run, const fs::path& root) {
  const TrainedCheckpoint ck = check_trained_checkpoint(run.checkpoint, root);
  if (run.weights_identity != loaded_identity(ck.shard, ck.shard_sha256))
    throw refused(run.checkpoint + ": the loaded weights are \"" + run.weights_identity +
                  "\", but training.json binds \"" + loaded_identity(ck.shard, ck.shard_sha256) +
                  "\"");
  const std::string id = out.filename().string();
  if (!receipts::is_bundle_id(id))
    throw refused("--out: the folder's name \"" + id +
                  "\" is the bundle's id: lowercase letters, digits, '.', '_' and '-'");
  if (run.targets.probes && !run.probes)
    throw refused("G2's quality_targets have probes (" + run.targets.probes->workload +
                  "), but none were run");
  const GateResult gate =
      judge_quality(run.targets, run.scores, run.probes ? &run.probes->grades : nullptr);
  receipts::BundleWriter bundle(out);
  json files = json::object();
  for (const Carried& c : kCarried) {
    const fs::path from = std::string(c.name) == "heldout.json" ? fs::path(run.heldout)
                                                                : fs::path(run.checkpoint) / c.name;
    const std::string bytes = receipts::read_file(from);
    bundle.add_bytes(c.path, bytes, c.kind);
    files[c.name] = sha256_hex(bytes);
  }
  const json engine = {{"device", run.device},
                       {"kv_cache_dtype", run.kv_cache_dtype},
                       {"precision_mode", run.precision_mode},
                       {"chunk", run.chunk}};
  json scores = run.scores.to_json();
  scores["schema"] = kScoresSchema;
  scores["generator"] = run.generator;
  scores["engine"] = engine;
  bundle.add_bytes(kScores, scores.dump(2) + "\n", "metrics");
  json probes;
  if (run.probes) {
    const workloads::WorkloadSpec& spec = run.probes->spec;
    bundle.add_bytes("inputs/" + spec.id + ".json", receipts::read_file(spec.source), "workload");
    std::string jsonl;
    for (const harness::RequestRecord& r : run.probes->records)
      jsonl += harness::to_json(r).dump() + "\n";
    bundle.add_bytes("requests.jsonl", jsonl, "requests");
    bundle.add_bytes("server/probes.log", run.probes->server_log, "log");
    probes = {{"workload", spec.id},
              {"workload_sha256", spec.sha256},
              {"server", run.probes->server_argv},
              {"server_sha256", run.probes->server_sha256},
              {"grades", probe_grades_json(*run.targets.probes, run.probes->grades)}};
  }
  const BuildInfo& b = build_info();
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const json candidate = {
      {"label", "candidate"},
      {"commit", b.commit},
      {"clean_tree", std::string(b.clean_tree) == "true"},
      {"binary_sha256", ec ? std::string(64, '0') : harness::file_sha256(exe.string())},
      {"profile", ""},
      {"profile_sha256", ""},
      {"effective_config_sha256", ""},
      {"model",
       {{"preset", run.model_id},
        {"config_sha256", run.model_config_sha256},
        {"weights", run.weights_identity}}},
      {"device", run.device},
      {"args", run.args}};
  int64_t tokens = 0;
  for (const harness::TaskLoss& l : run.scores.tasks) tokens += l.tokens;
  const std::string settings = run.device + ", kv " + run.kv_cache_dtype + ", " +
                               run.precision_mode + ", chunk " + std::to_string(run.chunk);
  const json record = {
      {"schema", receipts::kRecordSchema},
      {"id", id},
      {"title", "held-out loss of " + run.model_id + " (" + ck.weights_identity +
                    ") through the engine (" + settings + ")"},
      {"created_at", utc_now_iso8601()},
      {"state", "measurement"},
      {"level", "G2"},
      {"target", "the trained weights' held-out loss through the engine (" + settings +
                     ") within G2's quality_targets, with the weights, the held-out set and the "
                     "training sources bound by sha256"},
      {"change",
       {{"class", "operator"},
        {"option", nullptr},
        {"baseline", nullptr},
        {"candidate", candidate}}},
      {"environment", harness::probe_environment()},
      {"workloads", json::array()},
      {"gates", json::array({gate.to_json()})},
      {"metrics", quality_metrics(run.scores)},
      {"quality",
       {{"checkpoint", run.checkpoint},
        {"heldout", run.heldout},
        {"engine", engine},
        {"weights",
         {{"identity", ck.weights_identity},
          {"shard", ck.shard},
          {"shard_sha256", ck.shard_sha256}}},
        {"files", files},
        {"sources_sha256", ck.sources_sha256},
        {"targets", run.targets.to_json()},
        {"probes", probes}}},
      {"limitations",
       {"teacher-forced held-out loss over " + std::to_string(tokens) +
            " reply tokens: what the model predicts, not whether its greedy replies solve the "
            "tasks",
        "the weights shard is bound by sha256 (training.json, checked on disk when this bundle was "
        "written), not carried",
        "the verifier judges the gate again from heldout-scores.json and the probes' "
        "requests.jsonl; that those were measured rather than written rests on who ran the "
        "command"}}};
  return bundle.finish(record);
}

bool is_quality_record(const json& record) {
  return record.is_object() && record.contains("quality");
}

Problems rederive_quality(const fs::path& bundle, const json& record,
                          const std::vector<GateDefinition>& g2) {
  Problems p;
  try {
    const json& q = object(record, "", "quality");
    const json gates = record.value("gates", json::array());
    if (gates.size() != 1 || gates[0].value("id", "") != "G2")
      p.push_back({kManifest + "gates", "a quality bundle holds one gate, G2; got " +
                                            std::to_string(gates.size()) + " gate(s)"});
    check_bindings(bundle, record, q, p);
    const harness::HeldoutLoss scores = check_scores(bundle, record, q, p);
    const std::optional<ProbeGrades> probes = probe_grades(bundle, q, p);
    if (gates.empty()) return p;
    const json& targets = object(q, "quality", "targets");
    // The current definition first, then the superseded ones: the first that yields the recorded
    // gate and names the recorded targets re-derives it.
    const Problems judged = under_first_definition(
        g2,
        [&](const GateDefinition& d) -> std::optional<Problems> {
          if (!d.quality_targets) return std::nullopt;
          const QualityTargets& t = *d.quality_targets;
          // Targets with probes judge a bundle without them as not graded.
          const std::vector<workloads::GradeResult> none;
          Problems found = compare_judged_gate(
              gates[0], judge_quality(t, scores, probes ? &probes->grades : &none),
              kManifest + "gates[0]",
              "heldout-scores.json and requests.jsonl under G2's quality_targets");
          if (probes && t.probes &&
              !close_json(probes->recorded, probe_grades_json(*t.probes, probes->grades)))
            found.push_back({kManifest + "quality.probes.grades",
                             "are not the grades of requests.jsonl under these targets: " +
                                 shown(probe_grades_json(*t.probes, probes->grades))});
          if (!close_json(targets, d.quality_targets->to_json()))
            found.push_back(
                {kManifest + "quality.targets", "are not G2.json's quality_targets " +
                                                    shown(d.quality_targets->to_json()) +
                                                    " (sha256 " + d.sha256 + ")"});
          return found;
        },
        "quality_targets");
    p.insert(p.end(), judged.begin(), judged.end());
  } catch (const std::exception& e) {
    p.push_back({kManifest + "quality",
                 "the quality bundle cannot be re-derived: " + std::string(e.what())});
  }
  return p;
}

}  // namespace sparkglm::gates
