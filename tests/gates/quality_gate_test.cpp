// The quality gate can fail: the trained tinyGLM's held-out loss through the CPU backend passes
// G2's quality_targets, and each deliberately broken engine fails them (issue 18's negative
// controls). Each control's scores are printed beside the intact ones.
//   state not carried   each prefill chunk resumes from the other KDA state slot (the state of a
//                       different chunk), as a scheduler that loses a sequence's slot would
//   scale off by one    the MLA output projection read with its exponent one too high (x2), as a
//   exponent            block-scale bug would
//   wrong pools         the indexer's head weights zeroed: every pool ties and the tie rule picks
//                       the lowest-numbered ones, whatever the query
//   untrained           the preset's dummy weights
#include "gates/quality_gate.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/core/error.h"
#include "engine/core/thread_pool.h"
#include "engine/model/model_loader.h"
#include "harness/heldout_loss.h"

namespace sparkglm::gates {
namespace {

const std::string kRoot = SPARKGLM_SOURCE_DIR;

struct Fixture {
  QualityTargets targets = load_quality_targets(kRoot + "/gates");
  ThreadPool pool{2};
  std::unique_ptr<LoadedModel> model = load_model_dir(kRoot + "/" + targets.checkpoint);
  harness::HeldoutSet set =
      harness::read_heldout(kRoot + "/" + targets.heldout, model->config.vocab_size, 1 << 20);

  harness::HeldoutLoss score(const ModelConfig& config, const ModelWeights& weights,
                             const harness::SlotForChunk& slot_for = nullptr) {
    cpu::CpuRunnerOptions o;
    o.num_blocks = 512;  // 8192 tokens: the longest example fits
    o.num_state_slots = 2;
    o.kv_dtype = KvDtype::kBF16;  // as sparkglm-serve stores latents
    cpu::CpuModelRunner runner(config, weights, o, pool);
    return harness::score_heldout(runner, set, targets.chunk, slot_for);
  }
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
  const harness::HeldoutLoss intact = f.score(f.model->config, f.model->weights);
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
  show("state not carried", broken);
  EXPECT_EQ(judge_quality(f.targets, broken).status, "fail");
}

TEST(QualityGate, AWeightScaleOffByOneExponentFails) {
  Fixture& f = fixture();
  ModelWeights w = f.model->weights;
  rewrite(w, mla_layer(w).mla.o_proj, [](float x) { return 2.0f * x; });
  const harness::HeldoutLoss broken = f.score(f.model->config, w);
  show("scale off by one exp", broken);
  EXPECT_EQ(judge_quality(f.targets, broken).status, "fail");
}

TEST(QualityGate, AnIndexerThatSelectsTheWrongPoolsFails) {
  Fixture& f = fixture();
  ModelWeights w = f.model->weights;
  rewrite(w, mla_layer(w).mla.indexer.weights_proj, [](float) { return 0.0f; });
  const harness::HeldoutLoss broken = f.score(f.model->config, w);
  show("wrong pools", broken);
  EXPECT_EQ(judge_quality(f.targets, broken).status, "fail");
}

TEST(QualityGate, UntrainedWeightsFail) {
  Fixture& f = fixture();
  const auto dummy = load_model_preset("tinyglm-micro", 0, 1, f.pool);
  const harness::HeldoutLoss broken = f.score(dummy->config, dummy->weights);
  show("untrained", broken);
  EXPECT_EQ(judge_quality(f.targets, broken).status, "fail");
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
}

}  // namespace
}  // namespace sparkglm::gates
