#include "gates/serving_gate.h"

#include <gtest/gtest.h>

#include <vector>

#include "engine/core/sha256.h"
#include "tests/support/build_paths.h"

namespace sparkglm::gates {
namespace {

const std::string kRoot = sparkglm::testing::source_dir();

// A run of tinyglm-gate (small) in which every request succeeded with `rate` tok/s, the same
// token ids in every repetition, and `ttft` seconds to the first token.
struct FakeRun {
  ServingRun run;
  GateDefinition gate = load_gate(kRoot + "/gates", "G2");
  ChangeClassPolicy policy = ChangeClassPolicy::load(kRoot + "/gates");

  FakeRun() {
    // tinyglm-gate only: G2's determinism criterion judges the determinism workload's cases
    // against their C1 reference (tested in tests/workloads/grader_test.cpp), absent here.
    gate.workloads = {"tinyglm-gate"};
    std::erase_if(gate.criteria, [](const Criterion& c) { return c.grader == "determinism"; });
    workloads::WorkloadSpec spec =
        workloads::scaled(workloads::load_workload(kRoot + "/workloads/tinyglm-gate.json"), 0.05);
    workloads::PlanOptions options;
    options.model = "tinyglm-micro";
    run.plans["tinyglm-gate"] = workloads::plan_workload(spec, options);
    run.specs["tinyglm-gate"] = spec;
  }

  void add_arm(const std::string& arm, double rate, double ttft) {
    double t = 0;
    for (const workloads::CasePlan& c : run.plans["tinyglm-gate"].cases)
      for (const workloads::RepetitionPlan& rep : c.repetitions)
        for (const harness::RequestSpec& s : rep.requests) {
          harness::RequestRecord r;
          r.arm = arm;
          r.workload = "tinyglm-gate";
          r.case_id = s.case_id;
          r.repetition = s.repetition;
          r.index = s.index;
          r.marker = s.marker;
          r.ok = true;
          r.http_status = 200;
          r.finish_reason = "length";
          const int n = s.body.at("max_tokens").get<int>();
          r.completion_tokens = n;
          r.prompt_tokens = 100;
          r.start_s = t;
          r.first_output_s = t + ttft;
          r.first_visible_s = t + ttft;
          for (int i = 0; i < n; ++i) {
            r.token_ids.push_back(300 + (i + s.index) % 7);
            r.output_event_s.push_back(t + ttft + i / rate);
          }
          r.end_s = r.output_event_s.back() + 1e-4;
          std::string ids;
          for (int32_t id : r.token_ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
          r.token_ids_sha256 = sha256_hex(ids);
          t = r.end_s + 0.01;
          run.records.push_back(r);
        }
  }

  GateResult evaluate(const std::string& cls = "launcher-profile", bool g1 = false) {
    const auto metrics = case_metrics(run.records, "candidate", run.baseline);
    return evaluate_serving_gate(gate, run, metrics, policy.at(cls), g1);
  }

  // Literal names: temporary strings would make g++ 13 warn (-Wdangling-reference).
  harness::RequestRecord& measured(const char* arm, const char* case_id, int rep) {
    for (harness::RequestRecord& r : run.records)
      if (r.arm == arm && r.case_id == case_id && r.repetition == rep) return r;
    throw std::runtime_error("no such record");
  }
};

const CriterionResult* find(const GateResult& r, const std::string& prefix) {
  for (const CriterionResult& c : r.criteria)
    if (c.name.rfind(prefix, 0) == 0 && !c.pass) return &c;
  return nullptr;
}

TEST(ServingGate, ASingleCleanArmPassesAndSaysWhatIsNotApplicable) {
  FakeRun f;
  f.add_arm("candidate", 50, 0.1);
  const GateResult r = f.evaluate();
  EXPECT_EQ(r.status, "pass") << r.summary;
  EXPECT_NE(r.summary.find("A/B criteria not applicable"), std::string::npos);
  // Every case is graded for exact lengths and determinism.
  int exact = 0;
  for (const CriterionResult& c : r.criteria) exact += c.name.find("exact output lengths") == 0;
  EXPECT_EQ(exact, 3);
}

TEST(ServingGate, AFailedRequestFailsTheGate) {
  FakeRun f;
  f.add_arm("candidate", 50, 0.1);
  harness::RequestRecord& r = f.measured("candidate", "mixed_c4", 1);
  r.ok = false;
  r.error = "HTTP 500: boom";
  const GateResult g = f.evaluate();
  EXPECT_EQ(g.status, "fail");
  ASSERT_NE(find(g, "no request failed"), nullptr);
  EXPECT_NE(find(g, "no request failed")->note.find("HTTP 500: boom"), std::string::npos);
}

TEST(ServingGate, OutputThatChangesAcrossRepetitionsIsNondeterministic) {
  FakeRun f;
  f.add_arm("candidate", 50, 0.1);
  f.measured("candidate", "decode_c1", 2).token_ids_sha256 = std::string(64, 'a');
  const GateResult g = f.evaluate();
  EXPECT_EQ(g.status, "fail");
  EXPECT_NE(find(g, "candidate deterministic across repetitions (tinyglm-gate/decode_c1)"),
            nullptr);
}

TEST(ServingGate, ShortOutputFailsExactLength) {
  FakeRun f;
  f.add_arm("candidate", 50, 0.1);
  harness::RequestRecord& r = f.measured("candidate", "long_c2", 0);
  r.completion_tokens -= 1;
  r.token_ids.pop_back();
  EXPECT_NE(
      find(f.evaluate(), "exact output lengths with token ids returned (tinyglm-gate/long_c2)"),
      nullptr);
}

TEST(ServingGate, AnEqualAbPasses) {
  FakeRun f;
  f.run.baseline = "baseline";
  f.add_arm("candidate", 50, 0.1);
  f.add_arm("baseline", 50, 0.1);
  const GateResult g = f.evaluate();
  EXPECT_EQ(g.status, "pass") << g.summary;
}

TEST(ServingGate, ASlowerCandidateFailsThroughputAndTtft) {
  FakeRun f;
  f.run.baseline = "baseline";
  f.add_arm("candidate", 40, 0.3);  // 20 % slower decode, 200 ms later first token
  f.add_arm("baseline", 50, 0.1);
  const GateResult g = f.evaluate();
  EXPECT_EQ(g.status, "fail");
  EXPECT_NE(find(g, "median output throughput tok/s (tinyglm-gate/decode_c1)"), nullptr);
  EXPECT_NE(find(g, "median TTFT (tinyglm-gate/decode_c1)"), nullptr);
  EXPECT_EQ(find(g, "token ids equal the baseline's"), nullptr);
}

TEST(ServingGate, TokenIdsThatMoveFailUnlessTheClassAndG1AllowIt) {
  FakeRun f;
  f.run.baseline = "baseline";
  f.add_arm("candidate", 50, 0.1);
  f.add_arm("baseline", 50, 0.1);
  for (harness::RequestRecord& r : f.run.records)
    if (r.arm == "candidate" && r.case_id == "mixed_c4") r.token_ids_sha256 = std::string(64, 'b');
  EXPECT_NE(find(f.evaluate("launcher-profile", true), "token ids equal the baseline's"), nullptr);
  EXPECT_NE(find(f.evaluate("operator", false), "token ids equal the baseline's"), nullptr);
  const GateResult waived = f.evaluate("operator", true);
  EXPECT_EQ(find(waived, "token ids equal the baseline's"), nullptr);
  for (const CriterionResult& c : waived.criteria) {
    if (c.name == "token ids equal the baseline's") {
      EXPECT_NE(c.note.find("waived"), std::string::npos);
    }
  }
}

TEST(CaseMetrics, OneSamplePerMeasuredRepetitionWarmupsExcluded) {
  FakeRun f;
  f.add_arm("candidate", 50, 0.1);
  const auto metrics = case_metrics(f.run.records, "candidate", "");
  bool saw = false;
  for (const MetricSeries& m : metrics)
    if (m.name == "ttft_s" && m.case_id == "decode_c1") {
      saw = true;
      EXPECT_EQ(m.candidate.size(), 3u);  // three measured repetitions, the warmup left out
      for (double v : m.candidate) EXPECT_NEAR(v, 0.1, 1e-9);
      const nlohmann::json j = metric_to_json(m, 5.0);
      EXPECT_EQ(j["verdict"], "measured");
      EXPECT_TRUE(j["baseline"].is_null());
    }
  EXPECT_TRUE(saw);
}

}  // namespace
}  // namespace sparkglm::gates
