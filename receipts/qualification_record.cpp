#include "receipts/qualification_record.h"

#include <algorithm>
#include <initializer_list>
#include <regex>
#include <set>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "engine/options/option_registry.h"

namespace sparkglm::receipts {

using nlohmann::json;

namespace {

const std::vector<std::string> kStates = {"experiment", "candidate", "accepted",   "promoted",
                                          "rejected",   "baseline",  "measurement"};
const std::vector<std::string> kLevels = {"G0", "G1", "G2", "G3", "G4", "G5"};
const std::vector<std::string> kGateStatuses = {"pass", "fail", "not-run", "not-applicable"};
const std::vector<std::string> kChangeClasses = {"docs",
                                                 "launcher-profile",
                                                 "operator",
                                                 "scheduler-cache-parallelism",
                                                 "quantization-speculation",
                                                 "release"};
const std::vector<std::string> kVerdicts = {"better", "worse", "neutral-noisy", "measured"};
const std::vector<std::string> kDirections = {"higher", "lower"};
const std::vector<std::string> kAttestations = {"unattested", "maintainer-reviewed"};

// The schema's patterns, spelled the same way there (ECMAScript).
const std::regex kTimestamp("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?Z$");
const std::regex kPublicKey("^[A-Za-z0-9+/]{43}=$");        // base64 of 32 bytes
const std::regex kSignatureValue("^[A-Za-z0-9+/]{86}==$");  // base64 of 64 bytes

std::string join(const std::string& at, const std::string& key) {
  return at.empty() ? key : at + "." + key;
}

std::string item(const std::string& at, size_t i) {
  return at + "[" + std::to_string(i) + "]";
}

// A value as the message shows it: compact, cut short when long.
std::string shown(const json& v) {
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() > 80 ? text.substr(0, 77) + "..." : text;
}

std::string one_of(const std::vector<std::string>& values) {
  std::string text;
  for (const auto& v : values) text += (text.empty() ? "" : " | ") + v;
  return "one of " + text;
}

// Walks a record and collects problems. Each typed getter reports a missing field or a wrong type
// and returns null, so that checks below it simply skip what is absent.
class RecordChecker {
 public:
  Problems problems;

  void bad(const std::string& at, const std::string& what) { problems.push_back({at, what}); }

  const json* member(const json& obj, const std::string& at, const char* key) {
    const auto it = obj.find(key);
    if (it != obj.end()) return &*it;
    bad(join(at, key), "missing (required)");
    return nullptr;
  }

  const json* typed(const json& obj, const std::string& at, const char* key, const char* type,
                    bool (json::*is_type)() const noexcept, bool nullable = false) {
    const json* v = member(obj, at, key);
    if (!v || ((*v).*is_type)() || (nullable && v->is_null())) return v;
    bad(join(at, key),
        std::string("expected ") + type + (nullable ? " or null" : "") + ", got " + shown(*v));
    return nullptr;
  }

  const json* object(const json& o, const std::string& at, const char* key, bool nullable = false) {
    return typed(o, at, key, "an object", &json::is_object, nullable);
  }
  const json* array(const json& o, const std::string& at, const char* key) {
    return typed(o, at, key, "an array", &json::is_array);
  }
  void boolean(const json& o, const std::string& at, const char* key) {
    typed(o, at, key, "true or false", &json::is_boolean);
  }
  void number(const json& o, const std::string& at, const char* key, bool nullable = false) {
    typed(o, at, key, "a number", &json::is_number, nullable);
  }
  void count(const json& o, const std::string& at, const char* key) {
    const json* v = member(o, at, key);
    if (v && !(v->is_number_unsigned() || (v->is_number_integer() && v->get<int64_t>() >= 0)))
      bad(join(at, key), "expected a non-negative integer, got " + shown(*v));
  }

  // A string (non-empty when asked); choice() and pattern() narrow it further.
  const std::string* text(const json& o, const std::string& at, const char* key,
                          bool non_empty = false) {
    const json* v = typed(o, at, key, "a string", &json::is_string);
    if (!v) return nullptr;
    const auto* s = v->get_ptr<const std::string*>();
    if (non_empty && s->empty()) bad(join(at, key), "expected a non-empty string, got \"\"");
    return s;
  }
  void choice(const json& o, const std::string& at, const char* key,
              const std::vector<std::string>& values) {
    const std::string* s = text(o, at, key);
    if (s && std::find(values.begin(), values.end(), *s) == values.end())
      bad(join(at, key), "expected " + one_of(values) + ", got \"" + *s + "\"");
  }
  template <typename Rule>
  void pattern(const json& o, const std::string& at, const char* key, const std::string& expected,
               Rule rule) {
    const std::string* s = text(o, at, key);
    if (s && !rule(*s)) bad(join(at, key), "expected " + expected + ", got \"" + *s + "\"");
  }
  void sha256(const json& o, const std::string& at, const char* key, bool may_be_empty = false) {
    pattern(o, at, key,
            may_be_empty ? "64 lowercase hex digits or \"\"" : "64 lowercase hex digits",
            [&](const std::string& s) { return is_sha256_hex(s) || (may_be_empty && s.empty()); });
  }
  void string_list(const json& o, const std::string& at, const char* key) {
    const json* list = array(o, at, key);
    for (size_t i = 0; list && i < list->size(); ++i)
      if (!(*list)[i].is_string())
        bad(item(join(at, key), i), "expected a string, got " + shown((*list)[i]));
  }

  // Each element of the array `key` that is an object, with its path; others are reported.
  template <typename Visit>
  void each_object(const json& o, const std::string& at, const char* key, Visit visit) {
    const json* list = array(o, at, key);
    for (size_t i = 0; list && i < list->size(); ++i) {
      if ((*list)[i].is_object())
        visit((*list)[i], item(join(at, key), i));
      else
        bad(item(join(at, key), i), "expected an object, got " + shown((*list)[i]));
    }
  }

  void identity(const json& arm, const std::string& at) {
    text(arm, at, "label");
    text(arm, at, "commit", true);
    boolean(arm, at, "clean_tree");
    sha256(arm, at, "binary_sha256");
    text(arm, at, "profile");
    sha256(arm, at, "profile_sha256", true);
    sha256(arm, at, "effective_config_sha256", true);
    if (const json* model = object(arm, at, "model")) {
      const std::string m = join(at, "model");
      text(*model, m, "preset");
      sha256(*model, m, "config_sha256", true);
      text(*model, m, "weights");
    }
    text(arm, at, "device", true);
    string_list(arm, at, "args");
    // Optional (newer): how the arm's identity was learned; "endpoint" is a server measured
    // through `run --url`, whose binary and profile were not observed.
    if (arm.contains("observed")) choice(arm, at, "observed", {"process", "endpoint"});
    if (arm.contains("endpoint")) text(arm, at, "endpoint", true);
  }

  void change(const json& record) {
    const json* c = object(record, "", "change");
    if (!c) return;
    choice(*c, "change", "class", kChangeClasses);
    if (const json* option = object(*c, "change", "option", true); option && option->is_object()) {
      text(*option, "change.option", "name", true);
      member(*option, "change.option", "value");
    }
    if (const json* b = object(*c, "change", "baseline", true); b && b->is_object())
      identity(*b, "change.baseline");
    if (const json* cand = object(*c, "change", "candidate")) identity(*cand, "change.candidate");
  }

  void environment(const json& record) {
    const json* e = object(record, "", "environment");
    if (!e) return;
    for (const char* key : {"host", "os", "cpu", "driver", "cuda", "nccl", "compiler"})
      text(*e, "environment", key);
    count(*e, "environment", "cpu_cores");
    count(*e, "environment", "memory_bytes");
    each_object(*e, "environment", "gpus", [&](const json& gpu, const std::string& at) {
      text(gpu, at, "name", true);
      count(gpu, at, "memory_bytes");
      text(gpu, at, "clocks");
    });
  }

  void gates(const json& record) {
    std::set<std::string> seen;
    each_object(record, "", "gates", [&](const json& gate, const std::string& at) {
      choice(gate, at, "id", kLevels);
      choice(gate, at, "status", kGateStatuses);
      const std::string* summary = text(gate, at, "summary");
      const auto id = gate.find("id");
      if (id != gate.end() && id->is_string() && !seen.insert(id->get<std::string>()).second)
        bad(join(at, "id"), "gate " + id->get<std::string>() + " is listed twice");
      const auto status = gate.find("status");
      if (summary && summary->empty() && status != gate.end() && *status == "not-run")
        bad(join(at, "summary"), "a not-run gate says why in its summary; got \"\"");
      each_object(gate, at, "criteria", [&](const json& criterion, const std::string& c) {
        text(criterion, c, "name", true);
        member(criterion, c, "observed");
        member(criterion, c, "threshold");
        boolean(criterion, c, "pass");
      });
    });
  }

  void stats(const json& metric, const std::string& at, const char* key, bool nullable) {
    const json* s = object(metric, at, key, nullable);
    if (!s || s->is_null()) return;
    const std::string here = join(at, key);
    for (const char* field : {"median", "min", "max"}) number(*s, here, field);
    if (const json* samples = array(*s, here, "samples"))
      for (size_t i = 0; i < samples->size(); ++i)
        if (!(*samples)[i].is_number())
          bad(item(join(here, "samples"), i), "expected a number, got " + shown((*samples)[i]));
  }

  void metrics(const json& record, bool single_arm) {
    each_object(record, "", "metrics", [&](const json& metric, const std::string& at) {
      text(metric, at, "name", true);
      text(metric, at, "unit");
      if (metric.contains("workload")) text(metric, at, "workload");
      if (metric.contains("case")) text(metric, at, "case");
      choice(metric, at, "direction", kDirections);
      count(metric, at, "n");
      stats(metric, at, "baseline", true);
      stats(metric, at, "candidate", false);
      number(metric, at, "change_pct", true);
      number(metric, at, "p", true);
      if (const json* ci = member(metric, at, "ci95"); ci && !ci->is_null()) {
        if (!ci->is_array() || ci->size() != 2 || !(*ci)[0].is_number() || !(*ci)[1].is_number())
          bad(join(at, "ci95"), "expected [low, high] (two numbers) or null, got " + shown(*ci));
      }
      choice(metric, at, "verdict", kVerdicts);
      measured_rules(metric, at, single_arm);
    });
  }

  // A metric without a baseline is "measured", with no change, CI or p; a single-arm run has
  // only such metrics.
  void measured_rules(const json& metric, const std::string& at, bool single_arm) {
    const auto verdict = metric.find("verdict");
    const auto baseline = metric.find("baseline");
    if (verdict == metric.end() || baseline == metric.end() || !verdict->is_string()) return;
    const bool measured = *verdict == "measured";
    if (single_arm && !measured)
      bad(join(at, "verdict"),
          "change.baseline is null (a single-arm run), so expected \"measured\", got " +
              shown(*verdict));
    if (measured && !baseline->is_null())
      bad(join(at, "baseline"), "a \"measured\" metric has baseline null, got " + shown(*baseline));
    if (!measured && baseline->is_null())
      bad(join(at, "verdict"),
          "baseline is null, so expected \"measured\", got " + shown(*verdict));
    for (const char* key : {"change_pct", "ci95", "p"}) {
      const auto v = metric.find(key);
      if (measured && v != metric.end() && !v->is_null())
        bad(join(at, key),
            "a \"measured\" metric has " + std::string(key) + " null, got " + shown(*v));
    }
  }

  void artifacts(const json& record) {
    each_object(record, "", "artifacts", [&](const json& artifact, const std::string& at) {
      std::string why;
      pattern(artifact, at, "path", "a relative path inside the bundle",
              [&](const std::string& p) { return is_artifact_path(p, &why); });
      if (!why.empty()) problems.back().what += " (" + why + ")";
      const auto path = artifact.find("path");
      if (path != artifact.end() && *path == kManifestName)
        bad(join(at, "path"), "qualification.json is the manifest and is never listed");
      choice(artifact, at, "kind", artifact_kinds());
      sha256(artifact, at, "sha256");
      count(artifact, at, "bytes");
    });
  }

  void attestation(const json& record) {
    const json* a = object(record, "", "attestation");
    if (!a) return;
    choice(*a, "attestation", "status", kAttestations);
    const std::string* by = text(*a, "attestation", "by");
    const std::string* date = text(*a, "attestation", "date");
    const auto status = a->find("status");
    if (status != a->end() && *status == "maintainer-reviewed") {
      if (by && by->empty())
        bad("attestation.by", "a maintainer-reviewed record names who, got \"\"");
      if (date && !std::regex_match(*date, kTimestamp))
        bad("attestation.date",
            "expected a UTC timestamp YYYY-MM-DDTHH:MM:SSZ, got \"" + *date + "\"");
    }
    const auto sig = a->find("signature");
    if (sig == a->end()) return;
    if (!sig->is_object())
      return bad("attestation.signature", "expected an object, got " + shown(*sig));
    pattern(*sig, "attestation.signature", "algorithm", "\"ed25519\"",
            [](const std::string& s) { return s == "ed25519"; });
    pattern(*sig, "attestation.signature", "public_key", "base64 of a 32-byte Ed25519 key",
            [](const std::string& s) { return std::regex_match(s, kPublicKey); });
    pattern(*sig, "attestation.signature", "value", "base64 of a 64-byte Ed25519 signature",
            [](const std::string& s) { return std::regex_match(s, kSignatureValue); });
  }
};

}  // namespace

json parse_record_text(std::string_view bytes, const std::string& name) {
  return parse_json_unique_keys(bytes, name, ErrorKind::kInvalidArgument, json_limits::kReceipt);
}

std::string record_file_text(const json& record) {
  return record.dump(2) + "\n";
}

Problems check_record(const json& record) {
  RecordChecker c;
  if (!record.is_object()) {
    c.bad("(top level)", "expected an object, got " + shown(record));
    return c.problems;
  }
  c.pattern(record, "", "schema", std::string("\"") + kRecordSchema + "\"",
            [](const std::string& s) { return s == kRecordSchema; });
  c.pattern(record, "", "id", "an id matching ^[a-z0-9][a-z0-9._-]*$", is_bundle_id);
  c.text(record, "", "title", true);
  c.pattern(record, "", "created_at", "a UTC timestamp YYYY-MM-DDTHH:MM:SSZ",
            [](const std::string& s) { return std::regex_match(s, kTimestamp); });
  c.choice(record, "", "state", kStates);
  c.choice(record, "", "level", kLevels);
  c.text(record, "", "target", true);
  c.change(record);
  c.environment(record);
  c.each_object(record, "", "workloads", [&](const json& w, const std::string& at) {
    c.text(w, at, "id", true);
    c.sha256(w, at, "spec_sha256");
    if (w.contains("scale")) c.number(w, at, "scale");
  });
  c.gates(record);
  const auto change = record.find("change");
  const bool single_arm = change != record.end() && change->is_object() &&
                          change->contains("baseline") && (*change)["baseline"].is_null();
  c.metrics(record, single_arm);
  c.artifacts(record);
  c.string_list(record, "", "limitations");
  c.attestation(record);
  return c.problems;
}

bool is_bundle_id(const std::string& id) {
  return ReceiptRef::is_id(id);
}

bool is_sha256_hex(const std::string& text) {
  return ReceiptRef::is_sha256(text);
}

bool is_artifact_path(const std::string& path, std::string* why) {
  const auto fail = [&](const char* rule) {
    if (why) *why = rule;
    return false;
  };
  if (path.empty()) return fail("empty");
  if (path.front() == '/') return fail("absolute: starts with '/'");
  if (path.find('\\') != std::string::npos) return fail("a backslash; use forward slashes");
  if (std::any_of(path.begin(), path.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20; }))
    return fail("a control character");
  size_t start = 0;
  while (true) {
    const size_t slash = path.find('/', start);
    const std::string part = path.substr(start, slash == std::string::npos ? slash : slash - start);
    if (part.empty()) return fail("an empty component");
    if (part == "..") return fail("a '..' component");
    if (part == ".") return fail("a '.' component");
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

int level_number(const std::string& level) {
  const auto it = std::find(kLevels.begin(), kLevels.end(), level);
  return it == kLevels.end() ? -1 : int(it - kLevels.begin());
}

const std::vector<std::string>& artifact_kinds() {
  static const std::vector<std::string> kinds = {"requests", "workload", "config",    "identity",
                                                 "log",      "metrics",  "operators", "report"};
  return kinds;
}

}  // namespace sparkglm::receipts
