// /metrics shows speculative decoding's acceptance by draft position and its verify steps, as
// counters that bundles record over a run.
#include <gtest/gtest.h>

#include <string>

#include "engine/server/metrics.h"

namespace sparkglm::server {
namespace {

TEST(SpeculationMetrics, AcceptanceByPositionAndVerifyStepsAreCounters) {
  EngineStats e;
  e.speculation.drafted = {40, 40, 25, 0};
  e.speculation.accepted = {30, 12, 2, 0};
  e.speculation.verify_steps = 40;
  e.speculation.verify_tokens = 84;
  e.speculation.replayed_rows = 9;
  const std::string text = Metrics().render(e);
  for (const char* line :
       {"# TYPE sparkglm_spec_draft_tokens_total counter\n",
        "sparkglm_spec_draft_tokens_total{position=\"3\"} 25\n",
        "sparkglm_spec_accepted_tokens_total{position=\"1\"} 30\n",
        "sparkglm_spec_accepted_tokens_total{position=\"4\"} 0\n",
        "sparkglm_spec_verify_steps_total 40\n", "sparkglm_spec_verify_tokens_total 84\n",
        "sparkglm_spec_draft_failures_total 0\n", "sparkglm_spec_replayed_rows_total 9\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line;
}

}  // namespace
}  // namespace sparkglm::server
