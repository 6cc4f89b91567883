#include "workloads/request_plan.h"

#include "engine/core/error.h"

namespace sparkglm::workloads {

using nlohmann::json;

namespace {

// The request fields that change how the prompt renders; calibration counts with these set.
json template_fields(const CaseSpec& c, const std::string& model) {
  json b = json::object();
  if (!model.empty()) b["model"] = model;
  if (c.endpoint == Endpoint::kChat && c.chat_template_kwargs.is_object())
    b["chat_template_kwargs"] = c.chat_template_kwargs;
  return b;
}

std::string repetition_tag(int32_t repetition) {
  return repetition < 0 ? "w" + std::to_string(-repetition) : "r" + std::to_string(repetition);
}

harness::RequestSpec make_request(const CaseSpec& c, const Prompt& prompt, const json& base,
                                  int32_t repetition, int32_t index, double offset_s) {
  harness::RequestSpec r;
  r.case_id = c.id;
  r.repetition = repetition;
  r.index = index;
  r.path = endpoint_path(c.endpoint);
  r.offset_s = offset_s;
  r.marker = prompt.marker;
  r.prompt_tokens = prompt.tokens;
  r.timeout_s = c.timeout_s;

  json body = base;
  const json fields = prompt.body_fields();
  for (const auto& [key, value] : fields.items()) body[key] = value;
  body["max_tokens"] = c.max_tokens;
  body["ignore_eos"] = c.ignore_eos;
  body["temperature"] = 0;
  // A seed within int64's positive range, so that every server reads it the same way.
  body["seed"] = int64_t(c.prompt.seed & 0x7fffffffffffffffull);
  for (const auto& [key, value] : c.sampling.items()) body[key] = value;
  if (c.return_token_ids) body["return_token_ids"] = true;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  // Repetitions and cases never share prefix-cache entries; requests of one repetition may,
  // unless the case is a cold reference (each request its own salt).
  body["cache_salt"] = c.salt + "." + c.id + "." + repetition_tag(repetition) +
                       (c.cold_prefill ? ".q" + std::to_string(index) : "");
  r.body = std::move(body);
  return r;
}

}  // namespace

const CasePlan* WorkloadPlan::find_case(const std::string& case_id) const {
  for (const CasePlan& c : cases)
    if (c.case_id == case_id) return &c;
  return nullptr;
}

CasePlan plan_case(const CaseSpec& spec, const PlanOptions& options) {
  CasePlan plan;
  plan.case_id = spec.id;
  plan.arrival = spec.arrival;
  const json base = template_fields(spec, options.model);
  const std::vector<double> offsets = harness::arrival_offsets(spec.arrival, spec.requests);
  std::vector<Prompt> shared;
  if (!spec.fresh_each_repetition) shared = build_case_prompts(spec, 0, base, options.count);
  for (int32_t rep = -spec.warmups; rep < spec.repetitions; ++rep) {
    const std::vector<Prompt> prompts =
        spec.fresh_each_repetition ? build_case_prompts(spec, rep, base, options.count) : shared;
    SPARKGLM_ASSERT(int32_t(prompts.size()) == spec.requests, "plan_case: one prompt per request");
    RepetitionPlan r;
    r.repetition = rep;
    for (int32_t i = 0; i < spec.requests; ++i) {
      r.requests.push_back(make_request(spec, prompts[i], base, rep, i, offsets[i]));
      r.expected.push_back(prompts[i].expected);
    }
    plan.repetitions.push_back(std::move(r));
  }
  return plan;
}

WorkloadPlan plan_workload(const WorkloadSpec& spec, const PlanOptions& options) {
  WorkloadPlan plan;
  plan.workload_id = spec.id;
  plan.spec_sha256 = spec.sha256;
  plan.scale = spec.scale;
  plan.model = options.model;
  for (const CaseSpec& c : spec.cases) plan.cases.push_back(plan_case(c, options));
  return plan;
}

}  // namespace sparkglm::workloads
