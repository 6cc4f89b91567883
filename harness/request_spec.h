#pragma once
// One request a workload asks the harness to send: the exact body, when to send it, and what the
// grader needs to know. The harness knows nothing of the model; a RequestSpec is all it sees.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace sparkglm::harness {

struct RequestSpec {
  std::string workload;        // the workload this request belongs to, e.g. "tinyglm-gate"
  std::string case_id;         // the workload case this request belongs to, e.g. "decode_c1"
  int32_t repetition = 0;      // 0-based repetition of the case (warmups are negative: -1, -2, ...)
  int32_t index = 0;           // 0-based position of the request within one repetition
  std::string path;            // "/v1/chat/completions" or "/v1/completions"
  nlohmann::json body;         // the exact JSON body; "stream": true is forced by the client
  double offset_s = 0;         // send time relative to the repetition's start (staggered/Poisson)
  std::string marker;          // the per-request isolation marker placed in the prompt ("" if none)
  int32_t prompt_tokens = -1;  // the calibrated prompt length in tokens (-1: not calibrated)
  double timeout_s = 600;      // the request fails (recorded, never dropped) after this long
};

}  // namespace sparkglm::harness
