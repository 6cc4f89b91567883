// The quality gate can fail: the trained tinyGLM's held-out loss through the CPU backend passes
// G2's quality_targets, and each deliberately broken engine fails them (issue 18's negative
// controls). Each control's scores are printed beside the intact ones (scored once per process).
// Broken from outside the engine:
//   state not carried   each prefill chunk resumes from the other KDA state slot (the state of a
//                       different chunk), as a scheduler that loses a sequence's slot would
//   scale off by one    the MLA output projection read with its exponent one too high (x2), as a
//   exponent            block-scale bug would
//   wrong pools         the indexer's head weights zeroed: every pool ties and the tie rule picks
//                       the lowest-numbered ones, whatever the query
//   untrained           the preset's dummy weights
// Broken inside engine code (engine/model/engine_fault.h, set in the runner's options):
//   fp8 scale off by    fp8_g128 latents and indexer keys stored with their group scale doubled;
//   one exponent        judged at fp8_g128 KV, where the intact engine passes
// Two engine faults the gate does not catch on these weights, measured in docs/trained-tinyglm.md:
// a flipped indexer tie-break changes no score (the trained indexer rarely ties at the top-k
// boundary) and dropping the MoE clamp moves the mean NLL by 8e-5 (few pre-activations of the
// trained experts exceed the limit). The EngineFault tests below show instead that each reaches
// the runner's output where its rule matters.
#include "gates/quality_gate.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/core/error.h"
#include "engine/core/thread_pool.h"
#include "engine/model/engine_fault.h"
#include "engine/model/model_loader.h"
#include "gates/quality_probes.h"
#include "harness/heldout_loss.h"
#include "tests/support/build_paths.h"
#include "tests/support/fault_reach.h"

namespace sparkglm::gates {
namespace {

const std::string kRoot = sparkglm::testing::source_dir();

struct Fixture {
  QualityTargets targets = load_quality_targets(kRoot + "/gates");
  ThreadPool pool{2};
  std::unique_ptr<LoadedModel> model = load_model_dir(kRoot + "/" + targets.checkpoint);
  harness::HeldoutSet set =
      harness::read_heldout(kRoot + "/" + targets.heldout, model->config.vocab_size, 1 << 20);

  harness::HeldoutLoss score(const ModelConfig& config, const ModelWeights& weights,
                             const harness::SlotForChunk& slot_for = nullptr,
                             KvDtype kv_dtype = KvDtype::kBF16,  // as sparkglm-serve stores latents
                             EngineFault fault = EngineFault::kNone,
                             std::vector<double>* token_nll = nullptr) {
    cpu::CpuRunnerOptions o;
    o.num_blocks = 512;  // 8192 tokens: the longest example fits
    o.num_state_slots = 2;
    o.kv_dtype = kv_dtype;
    o.fault = fault;
    cpu::CpuModelRunner runner(config, weights, o, pool);
    return harness::score_heldout(runner, set, targets.chunk, slot_for, token_nll);
  }

  // Each reply token's nll on the committed weights, in set order.
  std::vector<double> token_nll(KvDtype kv_dtype, EngineFault fault = EngineFault::kNone) {
    std::vector<double> nll;
    score(model->config, model->weights, nullptr, kv_dtype, fault, &nll);
    return nll;
  }

  // The committed weights through an engine with `fault` built in.
  harness::HeldoutLoss score_faulted(EngineFault fault, KvDtype kv_dtype = KvDtype::kBF16) {
    return score(model->config, model->weights, nullptr, kv_dtype, fault);
  }

  // The intact engine's score at a KV dtype, scored once and shared by the tests that need it.
  const harness::HeldoutLoss& intact(KvDtype kv_dtype = KvDtype::kBF16) {
    auto it = intact_.find(kv_dtype);
    if (it == intact_.end())
      it = intact_.emplace(kv_dtype, score(model->config, model->weights, nullptr, kv_dtype)).first;
    return it->second;
  }

 private:
  std::map<KvDtype, harness::HeldoutLoss> intact_;
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

void show(const char* what, const harness::HeldoutLoss& l) {
  std::printf("%-22s nll %.4f accuracy %.4f |", what, l.nll, l.accuracy);
  for (const harness::TaskLoss& t : l.tasks) std::printf(" %s %.3f", t.task.c_str(), t.nll);
  std::printf("\n");
}

// A control's scores under the intact engine's (at the same KV dtype), and its verdict.
void show_beside(const char* what, const harness::HeldoutLoss& broken,
                 const harness::HeldoutLoss& intact, const GateResult& verdict) {
  show("intact", intact);
  show(what, broken);
  std::printf("%-22s nll %+.3g (x%.3f), accuracy %+.4f: %s\n", "", broken.nll - intact.nll,
              broken.nll / intact.nll, broken.accuracy - intact.accuracy, verdict.status.c_str());
}

// The layer that holds the MLA attention (tinyGLM: the fourth).
LayerWeights& mla_layer(ModelWeights& w) {
  for (LayerWeights& l : w.layers)
    if (l.kind == LayerKind::kSparseAttention) return l;
  throw Error(ErrorKind::kInvalidConfig, "the model has no MLA layer");
}

// `lin` replaced by an owned FP32 copy with every value passed through f.
template <typename F>
void rewrite(ModelWeights& w, Linear& lin, F f) {
  std::vector<float> v(size_t(lin.rows * lin.cols));
  for (int64_t r = 0; r < lin.rows; ++r)
    for (int64_t c = 0; c < lin.cols; ++c) v[size_t(r * lin.cols + c)] = f(lin.at(r, c));
  w.owned.push_back(std::move(v));
  lin.dtype = DType::kF32;
  lin.data = w.owned.back().data();
}

TEST(QualityGate, TheTrainedWeightsPassTheirReference) {
  Fixture& f = fixture();
  const harness::HeldoutLoss& intact = f.intact();
  show("intact", intact);
  const GateResult g = judge_quality(f.targets, intact);
  EXPECT_EQ(g.status, "pass") << g.to_json().dump(1);
  // The reference is this backend's own score: the gate's slack is for other backends, not here.
  EXPECT_NEAR(intact.nll, f.targets.reference_nll, 1e-3);
}

TEST(QualityGate, AStateNotCarriedAcrossPrefillChunksFails) {
  Fixture& f = fixture();
  const harness::HeldoutLoss broken =
      f.score(f.model->config, f.model->weights, [](int chunk) { return chunk % 2; });
  const GateResult g = judge_quality(f.targets, broken);
  show_beside("state not carried", broken, f.intact(), g);
  EXPECT_EQ(g.status, "fail");
}

TEST(QualityGate, AWeightScaleOffByOneExponentFails) {
  Fixture& f = fixture();
  ModelWeights w = f.model->weights;
  rewrite(w, mla_layer(w).mla.o_proj, [](float x) { return 2.0f * x; });
  const harness::HeldoutLoss broken = f.score(f.model->config, w);
  const GateResult g = judge_quality(f.targets, broken);
  show_beside("scale off by one exp", broken, f.intact(), g);
  EXPECT_EQ(g.status, "fail");
}

TEST(QualityGate, AnIndexerThatSelectsTheWrongPoolsFails) {
  Fixture& f = fixture();
  ModelWeights w = f.model->weights;
  rewrite(w, mla_layer(w).mla.indexer.weights_proj, [](float) { return 0.0f; });
  const harness::HeldoutLoss broken = f.score(f.model->config, w);
  const GateResult g = judge_quality(f.targets, broken);
  show_beside("wrong pools", broken, f.intact(), g);
  EXPECT_EQ(g.status, "fail");
}

TEST(QualityGate, UntrainedWeightsFail) {
  Fixture& f = fixture();
  const auto dummy = load_model_preset("tinyglm-micro", 0, 1, f.pool);
  const harness::HeldoutLoss broken = f.score(dummy->config, dummy->weights);
  const GateResult g = judge_quality(f.targets, broken);
  show_beside("untrained", broken, f.intact(), g);
  EXPECT_EQ(g.status, "fail");
}

TEST(QualityGate, AnFp8ScaleOffByOneExponentInsideTheEngineFails) {
  Fixture& f = fixture();
  // The control is judged at the KV dtype it breaks: fp8_g128 alone passes.
  const harness::HeldoutLoss& intact = f.intact(KvDtype::kFp8G128);
  const GateResult intact_verdict = judge_quality(f.targets, intact);
  EXPECT_EQ(intact_verdict.status, "pass") << intact_verdict.to_json().dump(1);
  const harness::HeldoutLoss broken =
      f.score_faulted(EngineFault::kFp8ScaleOffByOneExponent, KvDtype::kFp8G128);
  const GateResult g = judge_quality(f.targets, broken);
  show_beside("fp8 scale off by 1 exp", broken, intact, g);
  EXPECT_EQ(g.status, "fail");
}

// Every row's logits [n, vocab] of one prefill of the first held-out example's first n tokens
// through a CPU runner over `weights` with `fault` built in.
std::vector<float> prefill_logits(const ModelWeights& weights, int n, EngineFault fault) {
  Fixture& f = fixture();
  cpu::CpuRunnerOptions o;
  o.num_state_slots = 1;
  o.kv_dtype = KvDtype::kBF16;
  o.fault = fault;
  cpu::CpuModelRunner runner(f.model->config, weights, o, f.pool);
  return fault_reach::prefill_logits(runner, f.set.examples.at(0).tokens, n, o.block_size);
}

using fault_reach::rows_differ;

// Why the gate does not judge the two faults above per token either (docs/trained-tinyglm.md): on
// these weights each moves every reply token's nll less than a legitimate precision change does
// (latents stored in f32 instead of bf16), so no per-token bound could fail them and pass it.
TEST(EngineFault, NoPerTokenBoundSeparatesTheTieFlipOrClampDropFromAPrecisionChange) {
  Fixture& f = fixture();
  const std::vector<double> intact = f.token_nll(KvDtype::kBF16);
  const auto largest_move = [&](const std::vector<double>& other) {
    EXPECT_EQ(other.size(), intact.size());
    double m = 0;
    for (size_t i = 0; i < std::min(other.size(), intact.size()); ++i)
      m = std::max(m, std::abs(other[i] - intact[i]));
    return m;
  };
  const double f32 = largest_move(f.token_nll(KvDtype::kF32));
  const double tie = largest_move(f.token_nll(KvDtype::kBF16, EngineFault::kIndexerTieFlipped));
  const double clamp = largest_move(f.token_nll(KvDtype::kBF16, EngineFault::kMoeClampDropped));
  std::printf(
      "largest move of a reply token's nll over %zu tokens: f32 latents %.3g, tie flip "
      "%.3g, clamp dropped %.3g\n",
      intact.size(), f32, tie, clamp);
  EXPECT_LT(tie, f32);
  EXPECT_LT(clamp, f32);
}

TEST(EngineFault, TheTieFlipChangesEveryRowThatSelectsWhenAllPoolsTie) {
  // The indexer's head weights zeroed: every pool scores 0, so the intact engine attends the
  // lowest pools and the flipped one the highest. Rows that see at most topk pools attend
  // densely and must not change; every row that selects must.
  Fixture& f = fixture();
  ModelWeights w = f.model->weights;
  rewrite(w, mla_layer(w).mla.indexer.weights_proj, [](float) { return 0.0f; });
  const int n = 64;
  const std::vector<bool> differ = rows_differ(
      prefill_logits(w, n, EngineFault::kNone),
      prefill_logits(w, n, EngineFault::kIndexerTieFlipped), f.model->config.vocab_size);
  const int kpool = f.model->config.index_kpool;
  const int first_sparse = (f.model->config.index_topk_pools() + 1) * kpool - 1;
  ASSERT_LT(first_sparse, n);
  for (int t = 0; t < n; ++t) EXPECT_EQ(differ[size_t(t)], t >= first_sparse) << "row " << t;
}

TEST(EngineFault, TheClampDropChangesTheOutputWhereTheClampBinds) {
  // The shared experts' up projections x16: |u| passes the limit on most tokens, so the clamp
  // binds and dropping it must change the logits. With the trained weights it rarely binds.
  Fixture& f = fixture();
  ModelWeights w = f.model->weights;
  for (LayerWeights& l : w.layers)
    if (!l.dense_mlp && l.moe.shared) rewrite(w, l.moe.shared->up, [](float x) { return 16 * x; });
  const int n = 32;
  const std::vector<bool> differ =
      rows_differ(prefill_logits(w, n, EngineFault::kNone),
                  prefill_logits(w, n, EngineFault::kMoeClampDropped), f.model->config.vocab_size);
  int changed = 0;
  for (bool d : differ) changed += d;
  std::printf("clamp dropped: %d of %d rows' logits change\n", changed, n);
  EXPECT_GT(changed, n / 2);
}

TEST(QualityGate, ATaskMissingFromTheHeldoutSetFails) {
  Fixture& f = fixture();
  harness::HeldoutLoss l;
  l.nll = f.targets.reference_nll;
  l.accuracy = f.targets.reference_accuracy;
  const GateResult g = judge_quality(f.targets, l);
  EXPECT_EQ(g.status, "fail");
}

TEST(QualityGate, TargetsWithAMissingOrBadFieldAreRefusedByName) {
  const nlohmann::json good = {
      {"checkpoint", "c"},
      {"heldout", "h"},
      {"chunk", 256},
      {"max_nll_ratio", 1.02},
      {"max_task_nll_ratio", 1.05},
      {"max_accuracy_drop", 0.01},
      {"reference", {{"nll", 1.0}, {"accuracy", 0.5}, {"tasks", {{"copy", {{"nll", 2.0}}}}}}}};
  EXPECT_EQ(parse_quality_targets(good, "q").reference_task_nll.at("copy"), 2.0);
  auto error_of = [](nlohmann::json j) {
    try {
      parse_quality_targets(j, "q");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  nlohmann::json j = good;
  j.erase("heldout");
  EXPECT_NE(error_of(j).find("q.heldout"), std::string::npos);
  j = good;
  j["max_nll_ratio"] = 0.5;  // a ratio below 1 would fail the reference itself
  EXPECT_NE(error_of(j).find("max_nll_ratio >= 1"), std::string::npos);
  j = good;
  j["reference"]["tasks"]["copy"] = {{"nll", "x"}};
  EXPECT_NE(error_of(j).find("q.reference.tasks.copy.nll"), std::string::npos);
  // The probes' targets: a workload and shares in [0, 1], per case and grader.
  j = good;
  j["probes"] = {{"workload", "w"}, {"min_pass_rate", {{"c", {{"tool_call", 0.5}}}}}};
  EXPECT_EQ(parse_quality_targets(j, "q").probes->min_pass_rate.at("c").at("tool_call"), 0.5);
  EXPECT_EQ(parse_quality_targets(j, "q").to_json()["probes"], j["probes"]);
  j["probes"]["min_pass_rate"]["c"]["tool_call"] = 1.5;
  EXPECT_NE(error_of(j).find("q.probes.min_pass_rate.c.tool_call"), std::string::npos);
  j["probes"]["min_pass_rate"] = nlohmann::json::object();
  EXPECT_NE(error_of(j).find("q.probes.min_pass_rate"), std::string::npos);
  j["probes"] = {{"workload", "w"}, {"min_pass_rate", {{"c", {{"g", 1}}}}}, {"scale", 0.5}};
  EXPECT_NE(error_of(j).find("q.probes"), std::string::npos);
}

// The probes' negative control: the preset's untrained weights through the same server. They
// never call a tool, so the tool-call probe's pass rate is 0 and the gate fails; the constrained
// JSON case is shown beside it (a grammar keeps even random weights inside the schema until the
// reply runs out of tokens). The trained weights' run is QualityBundle.TheCommandWrites....
TEST(QualityProbes, UntrainedWeightsFailTheProbes) {
  Fixture& f = fixture();
  ASSERT_TRUE(f.targets.probes);
  std::ostringstream err;
  const ProbeRun run =
      run_probes(*f.targets.probes, kRoot + "/workloads",
                 sparkglm::testing::binary_dir() + "/sparkglm-serve", {"--preset", "tinyglm-micro"},
                 std::filesystem::temp_directory_path() /
                     ("quality-probes-untrained-" + std::to_string(getpid()) + ".log"),
                 err);
  const std::vector<CriterionResult> criteria = probe_criteria(*f.targets.probes, run.grades);
  bool tool_call_failed = false;
  for (const CriterionResult& c : criteria) {
    std::printf("untrained  %-44s %s %s\n", c.name.c_str(), c.observed.dump().c_str(),
                c.pass ? "pass" : "FAIL");
    if (c.name == "probe tool_call: tool_call pass rate") {
      tool_call_failed = !c.pass;
      EXPECT_EQ(c.observed, 0.0) << c.note;
    }
  }
  EXPECT_TRUE(tool_call_failed);
  harness::HeldoutLoss reference;
  reference.nll = f.targets.reference_nll;
  reference.accuracy = f.targets.reference_accuracy;
  EXPECT_EQ(judge_quality(f.targets, reference, &run.grades).status, "fail");
}

}  // namespace
}  // namespace sparkglm::gates
