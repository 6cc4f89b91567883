#include "gates/quality_gate.h"

#include <cstdio>
#include <fstream>

#include "engine/backend/runner_factory.h"
#include "engine/core/cli_args.h"
#include "engine/core/error.h"
#include "engine/core/thread_pool.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/latent_cache.h"

namespace sparkglm::gates {

namespace {

double number(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number())
    throw Error(ErrorKind::kInvalidConfig, where + "." + key + ": expected a number");
  return j[key].get<double>();
}

std::string text(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_string() || j[key] == "")
    throw Error(ErrorKind::kInvalidConfig, where + "." + key + ": expected a non-empty string");
  return j[key];
}

CriterionResult at_most(const std::string& name, double observed, double limit) {
  return {name, observed, limit, observed <= limit, ""};  // NaN fails
}

const char* const kUsage =
    "usage: sparkglm-qualify quality [--checkpoint DIR] [--heldout FILE] [--device cpu|cuda]\n"
    "         [--kv-cache-dtype bf16|fp8_g128|f32] [--chunk N] [--gates DIR] [--out FILE]\n"
    "  the held-out loss of the trained tinyGLM through the engine, judged against G2's\n"
    "  quality_targets (defaults: the checkpoint, held-out set and chunk named there)\n";

}  // namespace

QualityTargets parse_quality_targets(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw Error(ErrorKind::kInvalidConfig, where + ": expected an object");
  QualityTargets t;
  t.checkpoint = text(j, "checkpoint", where);
  t.heldout = text(j, "heldout", where);
  t.chunk = int(number(j, "chunk", where));
  t.max_nll_ratio = number(j, "max_nll_ratio", where);
  t.max_task_nll_ratio = number(j, "max_task_nll_ratio", where);
  t.max_accuracy_drop = number(j, "max_accuracy_drop", where);
  if (t.chunk < 1 || !(t.max_nll_ratio >= 1) || !(t.max_task_nll_ratio >= 1) ||
      !(t.max_accuracy_drop >= 0))
    throw Error(ErrorKind::kInvalidConfig, where +
                                               ": chunk >= 1, max_nll_ratio >= 1, "
                                               "max_task_nll_ratio >= 1 and max_accuracy_drop >= 0 "
                                               "expected");
  if (!j.contains("reference") || !j["reference"].is_object())
    throw Error(ErrorKind::kInvalidConfig, where + ".reference: expected an object");
  const nlohmann::json& r = j["reference"];
  t.reference_nll = number(r, "nll", where + ".reference");
  t.reference_accuracy = number(r, "accuracy", where + ".reference");
  if (!r.contains("tasks") || !r["tasks"].is_object() || r["tasks"].empty())
    throw Error(ErrorKind::kInvalidConfig, where + ".reference.tasks: expected an object");
  for (const auto& [task, v] : r["tasks"].items())
    t.reference_task_nll[task] = number(v, "nll", where + ".reference.tasks." + task);
  return t;
}

QualityTargets load_quality_targets(const std::string& gates_dir) {
  const std::string path = gates_dir + "/G2.json";
  const GateFile f = read_gate_file(path);
  if (!f.json.contains("quality_targets"))
    throw Error(ErrorKind::kInvalidConfig, path + ": no \"quality_targets\"");
  return parse_quality_targets(f.json["quality_targets"], path + ".quality_targets");
}

GateResult judge_quality(const QualityTargets& t, const harness::HeldoutLoss& got) {
  GateResult g;
  g.id = "G2";
  g.criteria.push_back(
      at_most("held-out nll (mean over tasks)", got.nll, t.reference_nll * t.max_nll_ratio));
  CriterionResult acc{"held-out token accuracy (mean over tasks)", got.accuracy,
                      t.reference_accuracy - t.max_accuracy_drop,
                      got.accuracy >= t.reference_accuracy - t.max_accuracy_drop, ""};
  g.criteria.push_back(acc);
  for (const harness::TaskLoss& l : got.tasks) {
    const auto ref = t.reference_task_nll.find(l.task);
    if (ref == t.reference_task_nll.end()) {
      g.criteria.push_back(
          {"held-out nll of " + l.task, l.nll, nullptr, false, "the reference has no such task"});
      continue;
    }
    g.criteria.push_back(
        at_most("held-out nll of " + l.task, l.nll, ref->second * t.max_task_nll_ratio));
  }
  for (const auto& [task, nll] : t.reference_task_nll) {
    bool seen = false;
    for (const harness::TaskLoss& l : got.tasks) seen = seen || l.task == task;
    if (!seen)
      g.criteria.push_back({"held-out nll of " + task, nullptr, nll * t.max_task_nll_ratio, false,
                            "the held-out set has no example of this task"});
  }
  g.conclude();
  return g;
}

int quality_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  try {
    const CliArgs a(args, {"--help"});
    if (a.has("--help")) {
      out << kUsage;
      return 0;
    }
    a.allow_only({"--checkpoint", "--heldout", "--device", "--kv-cache-dtype", "--chunk", "--gates",
                  "--out", "--help"});
    if (!a.positional().empty())
      throw Error(ErrorKind::kInvalidArgument, "unexpected argument \"" + a.positional()[0] + "\"");
    const QualityTargets t = load_quality_targets(a.str("--gates", "gates"));
    RunnerRequest r;
    r.model_dir = a.str("--checkpoint", t.checkpoint);
    r.device = a.str("--device", "cpu");
    r.kv_dtype = kv_dtype_from_string(a.str("--kv-cache-dtype", "bf16"));
    r.max_num_seqs = 1;
    const int chunk = int(a.integer("--chunk", t.chunk, 1, 1 << 20));
    ThreadPool pool;
    BuiltRunner b = build_runner(r, pool);
    const harness::HeldoutSet set =
        harness::read_heldout(a.str("--heldout", t.heldout), b.config.vocab_size, b.max_seq_len);
    const harness::HeldoutLoss got = harness::score_heldout(*b.runner, set, chunk);
    const GateResult g = judge_quality(t, got);
    char line[160];
    out << "held-out loss of " << b.model_id << " on " << r.device << " (kv "
        << to_string(r.kv_dtype) << ", chunk " << chunk << ", " << set.examples.size()
        << " examples, data " << set.generator << ")\n";
    std::snprintf(line, sizeof line, "  %-12s %9s %9s %9s %7s\n", "task", "nll", "reference",
                  "accuracy", "exact");
    out << line;
    for (const harness::TaskLoss& l : got.tasks) {
      const auto ref = t.reference_task_nll.find(l.task);
      std::snprintf(line, sizeof line, "  %-12s %9.4f %9.4f %9.4f %3d/%-3d\n", l.task.c_str(),
                    l.nll, ref == t.reference_task_nll.end() ? NAN : ref->second, l.accuracy,
                    l.exact, l.examples);
      out << line;
    }
    std::snprintf(line, sizeof line, "  %-12s %9.4f %9.4f %9.4f\n", "mean", got.nll,
                  t.reference_nll, got.accuracy);
    out << line << "quality gate: " << g.status << " (" << g.summary << ")\n";
    if (a.has("--out")) {
      std::ofstream f(a.str("--out", ""));
      f << nlohmann::json{{"model", b.model_id},     {"weights", b.weights_identity},
                          {"device", r.device},      {"kv_cache_dtype", to_string(r.kv_dtype)},
                          {"chunk", chunk},          {"heldout_generator", set.generator},
                          {"scores", got.to_json()}, {"gate", g.to_json()}}
               .dump(2)
        << "\n";
      if (!f) throw Error(ErrorKind::kIo, "--out: cannot write " + a.str("--out", ""));
    }
    return g.status == "pass" ? 0 : 1;
  } catch (const Error& e) {
    err << "sparkglm-qualify quality: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace sparkglm::gates
