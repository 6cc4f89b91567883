#pragma once
// Graders by name over the records of one arm's run of a workload (warmups are never graded):
//
//   exact_length          every request: ok, completion_tokens == max_tokens (when ignore_eos) and
//                         as many token ids returned (when return_token_ids)
//   structured_50         the output holds exactly 50 {"index": i, "square": i*i} objects with
//                         index 1..50 in order (a JSON array, optionally inside a ``` fence; the
//                         last parseable array wins), and nothing else in the array
//   arithmetic            the last "Answer: <n>" in the output (commas and a leading sign allowed)
//                         equals the request's expected value
//   needle                the output contains the request's expected 8-digit value
//   isolation             no foreign marker ("[[sg:...]]" other than its own) in any output; with
//                         {"require_own": true} each output also contains its own marker
//   determinism           {"reference_case": "c1"}: for every index, every output of this case and
//                         of the reference case has one token_ids_sha256
//   repetition_identical  for every index, the outputs of all repetitions share one
//                         token_ids_sha256
//   tool_call             the reply is exactly one tool call (the record's tool_calls, which the
//                         server parsed out of GLM's markup) of the function the request asks for,
//                         its arguments a JSON object with exactly that function's argument names,
//                         each of the expected JSON type (values are not compared)
//   json_schema           the reply, whitespace trimmed, is one JSON value that follows the
//                         request's schema (type, properties, required, items,
//                         additionalProperties false)
//
// Every grader but determinism and repetition_identical also counts the requests it failed
// (GradeResult::failed_requests; a missing record counts as failed), so a pass rate can be judged
// where a model is not expected to pass every request (the trained tinyGLM's probes,
// gates/quality_probes.h).
//
// A failed request fails every grader of its case. On tinyGLM's dummy weights the outputs mean
// nothing, so the quality graders (needs_real_model) fail there by design; the runner reports
// them as informational.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/request_record.h"
#include "workloads/request_plan.h"
#include "workloads/workload_spec.h"

namespace sparkglm::workloads {

struct GradeResult {
  std::string name;     // the grader
  std::string case_id;  // the case graded
  bool pass = false;
  nlohmann::json observed;      // e.g. 2 (failing requests), "Answer: 12" ...
  nlohmann::json expected;      // the threshold or expected value
  std::string detail;           // one line a person can act on: which request, what was wrong
  bool informational = false;   // set by the caller (the runner) for needs_real_model on tinyGLM
  int32_t requests = 0;         // the case's planned measured requests
  int32_t failed_requests = 0;  // of them, those with a failure (or no record)
  double pass_rate() const { return requests ? 1.0 - double(failed_requests) / requests : 0.0; }
};
nlohmann::json to_json(const GradeResult& result);

const std::vector<std::string>& grader_names();
bool is_grader(const std::string& name);
// structured_50, arithmetic, needle, tool_call, json_schema, and isolation with require_own:
// meaningful only on a real model's output.
bool needs_real_model(const GraderSpec& grader);

// One grader over one case. `records` may hold every record of the arm (all cases); the grader
// picks its case's measured records, and the reference case's for determinism.
GradeResult grade(const GraderSpec& grader, const CaseSpec& spec, const CasePlan& plan,
                  const std::vector<harness::RequestRecord>& records);
// Every grader of every case, in spec order.
std::vector<GradeResult> grade_workload(const WorkloadSpec& spec, const WorkloadPlan& plan,
                                        const std::vector<harness::RequestRecord>& records);

// The pieces, for tests and reports: the last "Answer: <n>" as digits ("" when none), and the
// structured_50 check (empty string when the text passes, otherwise why not).
std::string last_answer(const std::string& text);
std::string check_structured_50(const std::string& text);
// Why a reply's tool calls are not the one call `expected` ({"name", "arguments"} as
// probe_prompts.h writes it) names, "" when they are.
std::string check_tool_call(const std::vector<harness::ToolCallRecord>& calls,
                            const std::string& expected);
// Why `text` is not one JSON value following `schema` (its compact JSON), "" when it is.
std::string check_json_schema(const std::string& text, const std::string& schema);

}  // namespace sparkglm::workloads
