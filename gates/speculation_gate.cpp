#include "gates/speculation_gate.h"

#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "gates/case_metrics.h"
#include "harness/statistics.h"

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string normal_dir(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.string();
}

std::string joined(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : ",") + v;
  return out;
}

std::string workload_of(const SpeculationBench& b) {
  return "speculation-bench " + b.model() + " (" + b.device + ")";
}

double median_of(const SpeculationCell& c) {
  return harness::median(c.decode_tok_s);
}

std::string described(const SpeculationBench& b, const SpeculationCell& c) {
  return "k=" + std::to_string(c.k) + " " + c.rollback +
         (c.draft_in_step ? ", draft in step" : ", draft out of step") + " (" + b.file + ")";
}

void output_identity(GateResult& g, std::vector<std::string>& limits,
                     const std::vector<SpeculationBench>& benches) {
  std::map<int, std::pair<int, std::vector<std::string>>> by_c;  // C -> compared, differing
  for (const SpeculationBench& b : benches)
    for (const SpeculationCell& c : b.cells) {
      auto& [compared, differing] = by_c[c.concurrency];
      const SpeculationCell* k0 = b.k0_of(c);
      if (c.k == 0 || !k0) continue;
      ++compared;
      if (c.output_sha256 != k0->output_sha256) differing.push_back(b.file + " " + c.case_id());
    }
  for (const auto& [concurrency, result] : by_c) {
    const auto& [compared, differing] = result;
    const std::string name =
        "C" + std::to_string(concurrency) + " greedy output identical across k";
    const std::string note =
        compared == 0 ? "no cell with k >= 1 to compare"
        : differing.empty()
            ? std::to_string(compared) + " cell(s) with k >= 1 hash as their k = 0 cell"
            : "output_sha256 differs from the k = 0 cell's in " + joined(differing);
    g.criteria.push_back({name, int(differing.size()), "0 cells differ", differing.empty(), note});
    if (!differing.empty())
      limits.push_back("target missed: " + name + ": " + std::to_string(differing.size()) + " of " +
                       std::to_string(compared) + " cell(s) differ (" + note + ")");
  }
}

void speedup(GateResult& g, std::vector<std::string>& limits, const SpeculationTargets& t,
             const std::vector<SpeculationBench>& benches) {
  const std::string name = "C" + std::to_string(t.concurrency) +
                           " speedup over k = 0 (best median decode tok/s with k >= 1)";
  const std::string threshold = fmt(">= %.2fx", t.min_speedup);
  std::optional<double> best;
  std::string why;
  bool judged = false;
  for (const SpeculationBench& b : benches) {
    if (b.device != t.device || normal_dir(b.model_dir) != normal_dir(t.checkpoint)) {
      limits.push_back(b.file + " (" + b.model_dir + " on " + b.device + "): " + name +
                       " not judged, the target is stated for " + t.checkpoint + " on " + t.device +
                       "; its output identity is judged");
      continue;
    }
    if (t.min_prompts && b.prompts_run(t.concurrency) < *t.min_prompts) {
      const std::string ran =
          b.prompts == 0 ? "the file does not say how many prompts its cells ran"
                         : "its C" + std::to_string(t.concurrency) + " cells ran " +
                               std::to_string(b.prompts_run(t.concurrency)) +
                               " prompt(s) a repetition (waves " + std::to_string(b.waves) + ", " +
                               std::to_string(b.prompts) + " given)";
      limits.push_back(b.file + ": " + name + " not judged, " + ran + ", the target needs " +
                       std::to_string(*t.min_prompts) +
                       " (speculation_bench --waves); its output identity is judged");
      continue;
    }
    judged = true;
    for (const SpeculationCell& c : b.cells) {
      const SpeculationCell* k0 = b.k0_of(c);
      if (c.k == 0 || c.concurrency != t.concurrency || !k0) continue;
      const double ratio = median_of(c) / median_of(*k0);
      if (best && ratio <= *best) continue;
      best = ratio;
      why = described(b, c) + fmt(": median %.1f tok/s", median_of(c)) +
            fmt(" over k=0's %.1f tok/s", median_of(*k0));
    }
  }
  if (!judged) {
    g.summary = "speedup not judged: no file measured " + t.checkpoint + " on " + t.device +
                (t.min_prompts ? " over " + std::to_string(*t.min_prompts) + " prompts" : "");
    return;
  }
  if (!best) {
    g.criteria.push_back({name, "not measured", threshold, false, ""});
    limits.push_back("target missed: " + name + " (" + threshold +
                     ") was not measured: no cell with k >= 1 at C" +
                     std::to_string(t.concurrency) + " of " + t.checkpoint + " on " + t.device);
    return;
  }
  const bool pass = *best >= t.min_speedup;
  g.criteria.push_back({name, *best, threshold, pass, why});
  if (!pass)
    limits.push_back("target missed: " + name + " is " + fmt("%.3fx", *best) + ", target " +
                     threshold + fmt(", short by %.1f %%", 100 * (1 - *best / t.min_speedup)) +
                     ": " + why);
}

// The cases of every cell, unique over the files: a case met again in a later file of the same
// workload takes the file's number ("-f2").
std::vector<std::vector<std::string>> case_ids(const std::vector<SpeculationBench>& benches) {
  std::set<std::string> used;
  std::vector<std::vector<std::string>> out;
  for (size_t i = 0; i < benches.size(); ++i) {
    const std::string workload = workload_of(benches[i]);
    out.emplace_back();
    for (const SpeculationCell& c : benches[i].cells) {
      std::string id = c.case_id();
      if (!used.insert(workload + "/" + id).second) {
        id += "-f" + std::to_string(i + 1);
        used.insert(workload + "/" + id);
      }
      out.back().push_back(id);
    }
  }
  return out;
}

}  // namespace

GateResult judge_speculation(const SpeculationTargets& t,
                             const std::vector<SpeculationBench>& benches,
                             std::vector<std::string>* limitations) {
  std::vector<std::string> limits;
  GateResult g;
  g.id = "G2";
  output_identity(g, limits, benches);
  speedup(g, limits, t, benches);
  if (limitations) limitations->insert(limitations->end(), limits.begin(), limits.end());
  if (g.criteria.empty()) return not_run("G2", "no speculation_bench cell to judge");
  g.conclude();
  return g;
}

json speculation_metrics(const std::vector<SpeculationBench>& benches) {
  json out = json::array();
  const auto ids = case_ids(benches);
  for (size_t i = 0; i < benches.size(); ++i) {
    const SpeculationBench& b = benches[i];
    const std::string w = workload_of(b);
    for (size_t j = 0; j < b.cells.size(); ++j) {
      const SpeculationCell& c = b.cells[j];
      const std::string& id = ids[i][j];
      const auto add = [&](const std::string& name, const char* unit, std::vector<double> v) {
        out.push_back(metric_to_json({name, unit, w, id, true, {}, std::move(v)}, 5.0));
      };
      add("decode_tokens_per_s", "tok/s", c.decode_tok_s);
      const SpeculationCell* k0 = b.k0_of(c);
      if (c.k > 0 && k0) add("speedup_over_k0", "x", {median_of(c) / median_of(*k0)});
      for (size_t p = 0; p < c.acceptance.size(); ++p)
        add("acceptance_pos" + std::to_string(p + 1), "fraction", {c.acceptance[p]});
      add("tokens_per_verify_step", "tokens", {c.tokens_per_verify_step});
    }
  }
  return out;
}

}  // namespace sparkglm::gates
