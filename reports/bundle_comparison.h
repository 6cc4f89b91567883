#pragma once
// `compare A B`: the candidate arms of two bundles side by side, A as the reference. Two bundles
// are comparable only when they ran the same thing except the option under test: model identity,
// precision, KV dtype and budget (the servers' effective configurations), the profile, the
// workload specs (prompts, arrival, sampling, warmups), their scale, and the warmups that ran.
// Anything else that differs is refused, naming the field and both values.
#include <string>
#include <vector>

#include "reports/bundle_view.h"

namespace sparkglm::reports {

struct SettingsDifference {
  std::string field;  // "change.candidate.model.preset", "workloads/tinyglm-gate.json: seed", ...
  std::string a, b;   // the two values as compact JSON, "(absent)" when missing
};

// Every difference that makes A and B incomparable; empty when they may be compared.
std::vector<SettingsDifference> settings_differences(const BundleView& a, const BundleView& b);

// The side-by-side Markdown table; throws Error (kInvalidArgument) naming every differing field
// when settings_differences is not empty. Each metric present in both is compared with
// harness::compare_samples over the per-repetition samples (A as baseline).
std::string render_comparison(const BundleView& a, const BundleView& b,
                              double min_effect_pct = 5.0);

// The option names under test in either bundle (change.option.name), '_' and '-' unified, which
// the effective configurations may differ in.
std::vector<std::string> options_under_test(const BundleView& a, const BundleView& b);

}  // namespace sparkglm::reports
