#include "gates/quality_gate.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <system_error>

#include "engine/backend/runner_factory.h"
#include "engine/core/cli_args.h"
#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/core/thread_pool.h"
#include "engine/model/model_loader.h"
#include "engine/model/precision_mode.h"
#include "engine/runtime/latent_cache.h"
#include "gates/quality_bundle.h"
#include "gates/quality_probes.h"
#include "gates/verdict_rederivation.h"
#include "receipts/bundle_file.h"
#include "receipts/bundle_verifier.h"
#include "receipts/problem.h"
#include "receipts/qualification_record.h"
#include "receipts/trusted_keys.h"

namespace sparkglm::gates {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string fixed(const json& v, int digits) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", digits, v.get<double>());
  return b;
}

CriterionResult at_most(const std::string& name, double observed, double limit) {
  return {name, observed, limit, observed <= limit, ""};  // NaN fails
}

const char* const kUsage =
    "usage: sparkglm-qualify quality [--checkpoint DIR] [--heldout FILE] [--device cpu|cuda]\n"
    "         [--kv-cache-dtype bf16|fp8_g128|f32] [--precision-mode strict|spark] [--chunk N]\n"
    "         [--gates DIR] [--out DIR] [--server-bin PATH] [--workloads DIR]\n"
    "  the held-out loss of the trained tinyGLM through the engine, judged against G2's\n"
    "  quality_targets (defaults: the checkpoint, held-out set and chunk named there), and\n"
    "  the targets' probes workload served by sparkglm-serve (--server-bin; default: beside\n"
    "  this binary) on the same checkpoint, device, KV dtype and precision mode, judged by\n"
    "  pass rate.\n"
    "  --out DIR writes a bundle (its id is DIR's name) binding the weights, the held-out set,\n"
    "  the training sources and the scores by sha256; run from the repository root, which\n"
    "  training.json's source paths are relative to\n";

}  // namespace

QualityTargets load_quality_targets(const std::string& gates_dir) {
  const GateDefinition g2 = load_gate(gates_dir, "G2");
  if (!g2.quality_targets)
    throw Error(ErrorKind::kInvalidConfig, gates_dir + "/G2.json: no \"quality_targets\"");
  return *g2.quality_targets;
}

GateResult judge_quality(const QualityTargets& t, const harness::HeldoutLoss& got,
                         const std::vector<workloads::GradeResult>* probes) {
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
  if (t.probes && probes)
    for (CriterionResult& c : probe_criteria(*t.probes, *probes))
      g.criteria.push_back(std::move(c));
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
    a.allow_only({"--checkpoint", "--heldout", "--device", "--kv-cache-dtype", "--precision-mode",
                  "--chunk", "--gates", "--out", "--server-bin", "--workloads", "--help"});
    if (!a.positional().empty())
      throw Error(ErrorKind::kInvalidArgument, "unexpected argument \"" + a.positional()[0] + "\"");
    const QualityTargets t = load_quality_targets(a.str("--gates", "gates"));
    RunnerRequest r;
    r.model_dir = a.str("--checkpoint", t.checkpoint);
    r.device = a.str("--device", "cpu");
    r.kv_dtype = kv_dtype_from_string(a.str("--kv-cache-dtype", "bf16"));
    r.precision_mode = precision_mode_from_name(a.str("--precision-mode", "strict"));
    const std::string mode = precision_mode_name(r.precision_mode);
    r.max_num_seqs = 1;
    const int chunk = int(a.integer("--chunk", t.chunk, 1, 1 << 20));
    const std::filesystem::path folder = a.str("--out", "");
    if (a.has("--out")) {  // refused before the scoring, not after it
      if (!receipts::is_bundle_id(folder.filename().string()))
        throw Error(ErrorKind::kInvalidArgument,
                    "--out: the folder's name \"" + folder.filename().string() +
                        "\" is the bundle's id: lowercase letters, digits, '.', '_' and '-'");
      check_trained_checkpoint(r.model_dir, ".");
    }
    ThreadPool pool;
    BuiltRunner b = build_runner(r, pool);
    const harness::HeldoutSet set =
        harness::read_heldout(a.str("--heldout", t.heldout), b.config.vocab_size, b.max_seq_len);
    const harness::HeldoutLoss got = harness::score_heldout(*b.runner, set, chunk);
    // The runner gives its device memory back before the probes' server takes its own.
    b.runner.reset();
    b.host_model.reset();
    std::optional<ProbeRun> probes;
    if (t.probes) {
      std::error_code ec;
      const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
      const fs::path bin = ec ? fs::path("sparkglm-serve") : exe.parent_path() / "sparkglm-serve";
      const fs::path log = fs::temp_directory_path() /
                           ("sparkglm-quality-probes-" + std::to_string(getpid()) + ".log");
      probes = run_probes(*t.probes, a.str("--workloads", "workloads"),
                          a.str("--server-bin", bin.string()),
                          {"--model", r.model_dir, "--device", r.device, "--kv-cache-dtype",
                           to_string(r.kv_dtype), "--precision-mode", mode},
                          log, err);
      probes->server_log = receipts::read_file(log);
      fs::remove(log, ec);
    }
    const GateResult g = judge_quality(t, got, probes ? &probes->grades : nullptr);
    char line[160];
    out << "held-out loss of " << b.model_id << " on " << r.device << " (kv "
        << to_string(r.kv_dtype) << ", " << mode << ", chunk " << chunk << ", "
        << set.examples.size() << " examples, data " << set.generator << ")\n";
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
    out << line;
    if (probes) {
      out << "probes (" << t.probes->workload << ", greedy through sparkglm-serve on " << r.device
          << ")\n";
      std::snprintf(line, sizeof line, "  %-18s %-12s %9s %9s\n", "case", "grader", "pass rate",
                    "target");
      out << line;
      for (const json& p : probe_grades_json(*t.probes, probes->grades)) {
        const std::string target =
            p["min_pass_rate"].is_null() ? "recorded" : ">= " + fixed(p["min_pass_rate"], 3);
        std::snprintf(line, sizeof line, "  %-18s %-12s %4d of %-2d %9s\n",
                      p["case"].get<std::string>().c_str(), p["grader"].get<std::string>().c_str(),
                      int(p["requests"]) - int(p["failed"]), int(p["requests"]), target.c_str());
        out << line;
      }
    }
    out << "quality gate: " << g.status << " (" << g.summary << ")\n";
    if (a.has("--out")) {
      QualityRun run;
      run.checkpoint = r.model_dir;
      run.heldout = a.str("--heldout", t.heldout);
      run.device = r.device;
      run.kv_cache_dtype = to_string(r.kv_dtype);
      run.precision_mode = mode;
      run.chunk = chunk;
      run.model_id = b.model_id;
      run.model_config_sha256 = sha256_hex(b.config.to_json().dump());
      run.weights_identity = b.weights_identity;
      run.generator = set.generator;
      run.args = args;
      run.scores = got;
      run.targets = t;
      run.probes = probes ? &*probes : nullptr;
      write_quality_bundle(folder, run, ".");
      const receipts::Problems problems = receipts::verify_bundle(
          folder, full_verification(receipts::kTrustedKeysFolder, a.str("--gates", "gates")));
      for (const receipts::Problem& p : problems) err << "verify: " << p.to_string() << "\n";
      if (!problems.empty()) return 2;
      out << "bundle " << folder.string() << " verifies\n";
    }
    return g.status == "pass" ? 0 : 1;
  } catch (const Error& e) {
    err << "sparkglm-qualify quality: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace sparkglm::gates
