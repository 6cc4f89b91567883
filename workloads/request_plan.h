#pragma once
// A workload spec expanded into the exact requests the harness sends: per case, per repetition
// (warmups first, as negative repetition numbers), each body complete and each prompt calibrated.
// Both arms of an A/B send the same plan, so prompt bytes and arrival offsets match by design.
#include <cstdint>
#include <string>
#include <vector>

#include "harness/arrival_schedule.h"
#include "harness/request_spec.h"
#include "workloads/prompt_builder.h"
#include "workloads/workload_spec.h"

namespace sparkglm::workloads {

struct RepetitionPlan {
  int32_t repetition = 0;                      // -warmups .. -1, then 0 .. repetitions - 1
  std::vector<harness::RequestSpec> requests;  // index order; offsets from the arrival schedule
  std::vector<std::string> expected;           // per request: the answer graders check, or ""
  bool warmup() const { return repetition < 0; }
};

struct CasePlan {
  std::string case_id;
  harness::ArrivalSchedule arrival;         // what run_load is called with for each repetition
  std::vector<RepetitionPlan> repetitions;  // warmups first, then measured, in run order
};

struct WorkloadPlan {
  std::string workload_id;
  std::string spec_sha256;
  double scale = 1;
  std::string model;
  std::vector<CasePlan> cases;  // in spec order

  const CasePlan* find_case(const std::string& case_id) const;  // nullptr when absent
};

struct PlanOptions {
  std::string model;   // the body's "model"
  TokenCounter count;  // empty: prompts sized by estimate, RequestSpec::prompt_tokens = -1
};

// Bodies: model, messages or prompt, max_tokens, ignore_eos, temperature 0 unless the spec's
// sampling says otherwise, seed (sampling.seed, else the prompt seed), return_token_ids,
// stream with include_usage, chat_template_kwargs (chat), and cache_salt "<salt>.<case>.r<n>"
// (warmups "w<n>"; a cold_prefill case adds ".q<index>") so that repetitions and cases never
// share a prefix-cache entry while requests of one repetition (warm replays, conversation turns)
// can. Prompts that do not change across
// repetitions are built and calibrated once.
CasePlan plan_case(const CaseSpec& spec, const PlanOptions& options);
WorkloadPlan plan_workload(const WorkloadSpec& spec, const PlanOptions& options);

}  // namespace sparkglm::workloads
