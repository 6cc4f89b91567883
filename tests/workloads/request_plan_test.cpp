#include "workloads/request_plan.h"

#include <set>

#include <gtest/gtest.h>

#include "tests/support/build_paths.h"
#include "tests/workloads/token_counters.h"

namespace sparkglm::workloads {
namespace {

using nlohmann::json;

const std::string kDir = sparkglm::testing::source_dir() + "/workloads";

TEST(RequestPlan, GateCaseBodiesAndRepetitions) {
  const WorkloadSpec w = scaled(load_workload(kDir + "/tinyglm-gate.json"), 0.1);
  const WorkloadPlan plan = plan_workload(w, {"tinyglm", testing::byte_tokens});
  EXPECT_EQ(plan.workload_id, "tinyglm-gate");
  EXPECT_EQ(plan.spec_sha256, w.sha256);
  EXPECT_EQ(plan.scale, 0.1);
  const CasePlan* mixed = plan.find_case("mixed_c4");
  ASSERT_NE(mixed, nullptr);
  const CaseSpec& spec = *w.find_case("mixed_c4");
  ASSERT_EQ(mixed->repetitions.size(), size_t(spec.warmups + spec.repetitions));
  EXPECT_EQ(mixed->repetitions[0].repetition, -1);
  EXPECT_TRUE(mixed->repetitions[0].warmup());
  EXPECT_EQ(mixed->repetitions[1].repetition, 0);
  EXPECT_EQ(mixed->arrival.kind, harness::ArrivalSchedule::Kind::kStaggered);
  std::set<std::string> salts;
  for (const RepetitionPlan& rep : mixed->repetitions) {
    ASSERT_EQ(rep.requests.size(), 4u);
    for (size_t i = 0; i < rep.requests.size(); ++i) {
      const harness::RequestSpec& r = rep.requests[i];
      EXPECT_EQ(r.case_id, "mixed_c4");
      EXPECT_EQ(r.repetition, rep.repetition);
      EXPECT_EQ(r.index, int32_t(i));
      EXPECT_EQ(r.path, "/v1/completions");
      EXPECT_DOUBLE_EQ(r.offset_s, 0.25 * double(i));
      EXPECT_EQ(r.prompt_tokens, spec.prompt.tokens_for(int32_t(i)));
      EXPECT_EQ(testing::byte_tokens(r.body), r.prompt_tokens);
      EXPECT_EQ(r.body["model"], "tinyglm");
      EXPECT_EQ(r.body["max_tokens"], spec.max_tokens);
      EXPECT_EQ(r.body["ignore_eos"], true);
      EXPECT_EQ(r.body["temperature"], 0);
      EXPECT_EQ(r.body["return_token_ids"], true);
      EXPECT_TRUE(r.body.contains("seed"));
      EXPECT_NE(r.body["prompt"].get<std::string>().find(r.marker), std::string::npos);
      salts.insert(r.body["cache_salt"].get<std::string>());
      // The same request repeats byte for byte (cache_salt aside) in every repetition.
      json a = r.body, b = mixed->repetitions[1].requests[i].body;
      a.erase("cache_salt");
      b.erase("cache_salt");
      EXPECT_EQ(a, b);
    }
  }
  EXPECT_EQ(salts.size(), mixed->repetitions.size()) << "one cache_salt per repetition";
}

TEST(RequestPlan, SamplingAndTemplateFieldsReachTheBody) {
  const WorkloadSpec w = load_workload(kDir + "/decode-by-class.json");
  CaseSpec c = *w.find_case("prose");
  c.prompt.tokens = {300};
  c.sampling = {{"temperature", 0.7}, {"top_p", 0.9}, {"seed", 5}};
  const CasePlan plan = plan_case(c, {"m", testing::byte_tokens});
  const json& body = plan.repetitions.back().requests[0].body;
  EXPECT_EQ(body["temperature"], 0.7);
  EXPECT_EQ(body["top_p"], 0.9);
  EXPECT_EQ(body["seed"], 5);
  EXPECT_EQ(body["chat_template_kwargs"]["enable_thinking"], false);
  EXPECT_EQ(plan.repetitions.back().requests[0].path, "/v1/chat/completions");
  EXPECT_EQ(testing::byte_tokens(body), 300);
}

TEST(RequestPlan, ColdPrefillReplaysAndRenewsEachRepetition) {
  const WorkloadSpec w = scaled(load_workload(kDir + "/cold-prefill.json"), 0.05);
  const CasePlan plan = plan_case(*w.find_case("cold_8k"), {"m", testing::byte_tokens});
  std::set<std::string> prompts;
  for (const RepetitionPlan& rep : plan.repetitions) {
    ASSERT_EQ(rep.requests.size(), 2u);
    EXPECT_EQ(rep.requests[0].body, rep.requests[1].body) << "the replay is the same request";
    prompts.insert(rep.requests[0].body["prompt"].get<std::string>());
  }
  EXPECT_EQ(prompts.size(), plan.repetitions.size()) << "every repetition starts cold";
}

TEST(RequestPlan, DeterminismCasesSendTheSamePrompts) {
  const WorkloadSpec w = load_workload(kDir + "/determinism.json");
  const WorkloadPlan plan = plan_workload(w, {"m", testing::byte_tokens});
  const CasePlan& c1 = *plan.find_case("det_c1");
  std::set<size_t> lengths;
  for (const char* id : {"det_c4", "det_c8"}) {
    const CasePlan& other = *plan.find_case(id);
    ASSERT_EQ(other.repetitions[0].requests.size(), 8u) << id;
    for (size_t i = 0; i < 8; ++i) {
      const auto& a = c1.repetitions[0].requests[i].body;
      const auto& b = other.repetitions[0].requests[i].body;
      EXPECT_EQ(a["prompt"], b["prompt"]) << id << " request " << i;
      EXPECT_EQ(b["logprobs"], 5) << "logprob bits are compared too";
      lengths.insert(a["prompt"].get<std::string>().size());
    }
    EXPECT_NE(c1.repetitions[0].requests[0].body["cache_salt"],
              other.repetitions[0].requests[0].body["cache_salt"]);
  }
  EXPECT_EQ(lengths.size(), 8u) << "prompts of eight different lengths";
  EXPECT_EQ(plan.find_case("det_c4")->arrival.concurrency, 4);
  EXPECT_EQ(plan.find_case("det_c8")->arrival.kind, harness::ArrivalSchedule::Kind::kStaggered);
}

TEST(RequestPlan, AColdReferenceCaseSendsTheWarmPromptsUnderSaltsOfTheirOwn) {
  const WorkloadSpec w = scaled(load_workload(kDir + "/multi-turn.json"), 0.05);
  const WorkloadPlan plan = plan_workload(w, {"m", testing::byte_tokens});
  const CasePlan& warm = *plan.find_case("conversation_30k_48k");
  const CasePlan& cold = *plan.find_case("conversation_30k_48k_cold");
  ASSERT_EQ(cold.repetitions.size(), 1u);
  const RepetitionPlan& warm_rep = warm.repetitions.back();
  std::set<std::string> cold_salts, warm_salts;
  ASSERT_EQ(cold.repetitions[0].requests.size(), warm_rep.requests.size());
  for (size_t i = 0; i < warm_rep.requests.size(); ++i) {
    json a = warm_rep.requests[i].body, b = cold.repetitions[0].requests[i].body;
    warm_salts.insert(a["cache_salt"].get<std::string>());
    cold_salts.insert(b["cache_salt"].get<std::string>());
    a.erase("cache_salt");
    b.erase("cache_salt");
    EXPECT_EQ(a, b) << "turn " << i << ": the reference sends the warm case's request";
  }
  EXPECT_EQ(warm_salts.size(), 1u) << "turns of one conversation share their cache";
  EXPECT_EQ(cold_salts.size(), warm_rep.requests.size()) << "no cold turn can hit another";
  // The warm case's answers must equal the cold ones (restore equivalence).
  bool graded = false;
  for (const GraderSpec& g : w.find_case("conversation_30k_48k")->graders)
    graded = graded || (g.name == "determinism" &&
                        g.params.value("reference_case", "") == "conversation_30k_48k_cold");
  EXPECT_TRUE(graded);
}

// The CI path: every committed workload, small, planned with tinyGLM's tokenizer to exact sizes.
TEST(RequestPlan, EveryWorkloadPlansExactlyAtCiScale) {
  for (const std::string& path : workload_files(kDir)) {
    const WorkloadSpec w = scaled(load_workload(path), 0.05);
    SCOPED_TRACE(w.id);
    WorkloadPlan plan;
    ASSERT_NO_THROW(plan = plan_workload(w, {"tinyglm", testing::byte_tokens}));
    ASSERT_EQ(plan.cases.size(), w.cases.size());
    for (size_t k = 0; k < w.cases.size(); ++k) {
      const CaseSpec& c = w.cases[k];
      std::set<std::string> markers;
      for (const RepetitionPlan& rep : plan.cases[k].repetitions) {
        ASSERT_EQ(rep.requests.size(), size_t(c.requests));
        for (const harness::RequestSpec& r : rep.requests) {
          EXPECT_EQ(testing::byte_tokens(r.body), c.prompt.tokens_for(r.index)) << c.id;
          if (rep.repetition == 0) markers.insert(r.marker);
        }
      }
      EXPECT_EQ(markers.size(), size_t(c.warm_replay ? c.requests / 2 : c.requests)) << c.id;
    }
  }
}

}  // namespace
}  // namespace sparkglm::workloads
