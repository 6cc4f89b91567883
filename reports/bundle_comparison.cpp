#include "reports/bundle_comparison.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "engine/core/error.h"
#include "harness/statistics.h"
#include "reports/markdown_report.h"
#include "reports/metric_row.h"
#include "reports/text_table.h"

namespace sparkglm::reports {

namespace {

using nlohmann::json;
using Differences = std::vector<SettingsDifference>;

// Keys of an effective configuration that say where a server listened, not what it computed.
const std::set<std::string> kRunLocalOptions = {"port",        "bind",    "master-addr",
                                                "master-port", "api-key", "rank"};

std::string shown(const json* v) {
  if (!v) return "(absent)";
  return fit_width(v->dump(-1, ' ', false, json::error_handler_t::replace), 80);
}

std::string normalized(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

void add(Differences& out, const std::string& field, const json* a, const json* b) {
  out.push_back({field, shown(a), shown(b)});
}

// Every leaf where a and b differ, named by its path below `path`.
void json_differences(const json* a, const json* b, const std::string& path, Differences& out) {
  if (a && b && a->is_object() && b->is_object()) {
    std::set<std::string> keys;
    for (const auto& [k, v] : a->items()) keys.insert(k);
    for (const auto& [k, v] : b->items()) keys.insert(k);
    for (const std::string& k : keys) {
      const auto ia = a->find(k), ib = b->find(k);
      json_differences(ia == a->end() ? nullptr : &*ia, ib == b->end() ? nullptr : &*ib,
                       path.empty() ? k : path + "." + k, out);
    }
    return;
  }
  if (a && b && a->is_array() && b->is_array() && a->size() == b->size()) {
    for (size_t i = 0; i < a->size(); ++i)
      json_differences(&(*a)[i], &(*b)[i], path + "[" + std::to_string(i) + "]", out);
    return;
  }
  if (!a || !b || *a != *b) add(out, path, a, b);
}

// server/<arm>/effective-config.json of the candidate arm: "candidate", else the only arm.
std::string effective_config_path(const BundleView& bundle) {
  const std::filesystem::path server = bundle.dir / "server";
  if (std::filesystem::exists(server / "candidate" / "effective-config.json"))
    return "server/candidate/effective-config.json";
  std::vector<std::string> found;
  if (std::filesystem::is_directory(server))
    for (const auto& entry : std::filesystem::directory_iterator(server))
      if (std::filesystem::exists(entry.path() / "effective-config.json"))
        found.push_back("server/" + entry.path().filename().string() + "/effective-config.json");
  return found.size() == 1 ? found[0] : "";
}

void config_differences(const BundleView& a, const BundleView& b,
                        const std::vector<std::string>& under_test, Differences& out) {
  const std::string pa = effective_config_path(a), pb = effective_config_path(b);
  if (pa.empty() && pb.empty()) return;
  if (pa.empty() || pb.empty()) {
    out.push_back({"server/candidate/effective-config.json", pa.empty() ? "(absent)" : pa,
                   pb.empty() ? "(absent)" : pb});
    return;
  }
  json ca = read_bundle_json(a, pa).value_or(json::object());
  json cb = read_bundle_json(b, pb).value_or(json::object());
  for (json* c : {&ca, &cb}) {
    if (!c->is_object()) continue;
    for (auto it = c->begin(); it != c->end();) {
      const std::string key = normalized(it.key());
      const bool skip = kRunLocalOptions.count(key) ||
                        std::find(under_test.begin(), under_test.end(), key) != under_test.end();
      it = skip ? c->erase(it) : std::next(it);
    }
  }
  const size_t before = out.size();
  json_differences(&ca, &cb, "", out);
  for (size_t i = before; i < out.size(); ++i) out[i].field = pa + ": " + out[i].field;
}

std::map<std::string, const json*> workloads_by_id(const json& record) {
  std::map<std::string, const json*> out;
  const json* list = find_path(record, "workloads");
  if (list && list->is_array())
    for (const json& w : *list) out[text_at(w, "id", "")] = &w;
  return out;
}

void workload_differences(const BundleView& a, const BundleView& b, Differences& out) {
  const auto wa = workloads_by_id(a.record), wb = workloads_by_id(b.record);
  std::set<std::string> ids;
  for (const auto& [id, w] : wa) ids.insert(id);
  for (const auto& [id, w] : wb) ids.insert(id);
  for (const std::string& id : ids) {
    const std::string field = "workloads[id=" + id + "]";
    const auto ia = wa.find(id), ib = wb.find(id);
    if (ia == wa.end() || ib == wb.end()) {
      add(out, field, ia == wa.end() ? nullptr : ia->second, ib == wb.end() ? nullptr : ib->second);
      continue;
    }
    json_differences(find_path(*ia->second, "scale"), find_path(*ib->second, "scale"),
                     field + ".scale", out);
    const json* sa = find_path(*ia->second, "spec_sha256");
    const json* sb = find_path(*ib->second, "spec_sha256");
    if (sa && sb && *sa == *sb) continue;
    // Name the field inside the spec (seed, arrival, sampling, warmups) when both specs are here.
    const std::string file = "workloads/" + id + ".json";
    const auto spec_a = read_bundle_json(a, file), spec_b = read_bundle_json(b, file);
    const size_t before = out.size();
    if (spec_a && spec_b) json_differences(&*spec_a, &*spec_b, "", out);
    for (size_t i = before; i < out.size(); ++i) out[i].field = file + ": " + out[i].field;
    if (out.size() == before) add(out, field + ".spec_sha256", sa, sb);
  }
}

// Warmup requests per case of the candidate arm as they ran (negative repetitions in
// requests.jsonl); the candidate arm is every record not of the baseline.
void warmup_differences(const BundleView& a, const BundleView& b, Differences& out) {
  auto count = [](const BundleView& bundle) {
    std::map<std::string, int> warmups;
    for (const auto& r : bundle.requests)
      if (r.repetition < 0 && r.arm != "baseline")
        ++warmups[r.workload.empty() ? r.case_id : r.workload + " / " + r.case_id];
    return warmups;
  };
  const auto ca = count(a), cb = count(b);
  std::set<std::string> cases;
  for (const auto& [c, n] : ca) cases.insert(c);
  for (const auto& [c, n] : cb) cases.insert(c);
  for (const std::string& c : cases) {
    const int na = ca.count(c) ? ca.at(c) : 0, nb = cb.count(c) ? cb.at(c) : 0;
    if (na != nb)
      out.push_back(
          {"requests.jsonl: warmup requests of case " + c, std::to_string(na), std::to_string(nb)});
  }
}

}  // namespace

std::vector<std::string> options_under_test(const BundleView& a, const BundleView& b) {
  std::vector<std::string> names;
  for (const BundleView* bundle : {&a, &b}) {
    const json* name = find_path(bundle->record, "change.option.name");
    if (name && name->is_string()) names.push_back(normalized(name->get<std::string>()));
  }
  return names;
}

std::vector<SettingsDifference> settings_differences(const BundleView& a, const BundleView& b) {
  Differences out;
  const json* oa = find_path(a.record, "change.option.name");
  const json* ob = find_path(b.record, "change.option.name");
  if (oa && ob && !oa->is_null() && !ob->is_null() && *oa != *ob)
    add(out, "change.option.name", oa, ob);
  const std::vector<std::string> under_test = options_under_test(a, b);
  json_differences(find_path(a.record, "change.candidate.model"),
                   find_path(b.record, "change.candidate.model"), "change.candidate.model", out);
  json_differences(find_path(a.record, "change.candidate.profile"),
                   find_path(b.record, "change.candidate.profile"), "change.candidate.profile",
                   out);
  // With an option under test the profile file may carry it; the effective configurations,
  // compared below option by option, then stand in for the profile's hash.
  if (under_test.empty())
    json_differences(find_path(a.record, "change.candidate.profile_sha256"),
                     find_path(b.record, "change.candidate.profile_sha256"),
                     "change.candidate.profile_sha256", out);
  config_differences(a, b, under_test, out);
  workload_differences(a, b, out);
  warmup_differences(a, b, out);
  return out;
}

std::string render_comparison(const BundleView& a, const BundleView& b, double min_effect_pct) {
  const Differences differences = settings_differences(a, b);
  if (!differences.empty()) {
    std::string message = "refusing to compare " + a.dir.string() + " (A) with " + b.dir.string() +
                          " (B): their settings differ in";
    for (const SettingsDifference& d : differences)
      message += "\n  " + d.field + ": A " + d.a + ", B " + d.b;
    throw Error(ErrorKind::kInvalidArgument, message);
  }
  std::ostringstream md;
  md << "# Compare\n\n";
  md << markdown_table(
      {"", "bundle", "title", "qualification.json sha256"},
      {{"A", text_at(a.record, "id"), text_at(a.record, "title"), a.qualification_sha256},
       {"B", text_at(b.record, "id"), text_at(b.record, "title"), b.qualification_sha256}});
  const json* va = find_path(a.record, "change.option");
  const json* vb = find_path(b.record, "change.option");
  md << "\nSettings match (model, precision, KV, profile, workloads, warmups)";
  if (!options_under_test(a, b).empty())
    md << " except the option under test: A " << markdown_escape(shown(va)) << ", B "
       << markdown_escape(shown(vb));
  md << ". Medians are of the candidate arm's per-repetition samples; change, CI (B / A), "
        "p and verdict from harness::compare_samples with A as the baseline and a minimum "
        "effect of "
     << min_effect_pct << "%.\n\n";

  std::vector<std::vector<std::string>> rows;
  const std::vector<MetricRow> ma = metric_rows(a.record), mb = metric_rows(b.record);
  auto key = [](const MetricRow& r) { return r.workload + "\n" + r.case_id + "\n" + r.name; };
  for (const MetricRow& ra : ma) {
    const auto rb =
        std::find_if(mb.begin(), mb.end(), [&](const MetricRow& r) { return key(r) == key(ra); });
    if (rb == mb.end()) {
      rows.push_back({ra.cell(), ra.name, ra.unit, ra.candidate ? format_range(*ra.candidate) : "-",
                      "(absent)", "-", "-", "-", "only in A"});
      continue;
    }
    std::vector<std::string> row = {ra.cell(), ra.name, ra.unit,
                                    ra.candidate ? format_range(*ra.candidate) : "-",
                                    rb->candidate ? format_range(*rb->candidate) : "-"};
    try {
      if (!ra.candidate || !rb->candidate)
        throw Error(ErrorKind::kInvalidArgument, "no candidate samples");
      const harness::Comparison c =
          harness::compare_samples(ra.candidate->samples, rb->candidate->samples,
                                   ra.direction == "lower" ? harness::Direction::kLowerIsBetter
                                                           : harness::Direction::kHigherIsBetter,
                                   min_effect_pct);
      row.insert(row.end(), {format_change_pct(c.change_pct), format_ci(c.ci95.lo, c.ci95.hi),
                             format_p(c.p), harness::to_string(c.verdict)});
    } catch (const Error&) {
      row.insert(row.end(), {"-", "-", "-", "no samples"});
    }
    rows.push_back(row);
  }
  for (const MetricRow& rb : mb)
    if (std::none_of(ma.begin(), ma.end(), [&](const MetricRow& r) { return key(r) == key(rb); }))
      rows.push_back({rb.cell(), rb.name, rb.unit, "(absent)",
                      rb.candidate ? format_range(*rb.candidate) : "-", "-", "-", "-",
                      "only in B"});
  md << markdown_table({"case", "metric", "unit", "A median [min .. max]", "B median [min .. max]",
                        "change", "95% CI", "p", "verdict"},
                       rows);
  return md.str();
}

}  // namespace sparkglm::reports
