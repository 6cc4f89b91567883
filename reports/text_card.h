#pragma once
// The fixed-width text card of a bundle: the PASS/FAIL header from its gates, what it claims, the
// system it ran on, per-case medians with ranges, the gates, the A/B rows when there is a
// baseline, the limitations, and the receipt hash. Every line fits kCardWidth columns, and
// control characters from the record are replaced so that printing a card cannot drive a terminal.
#include <string>

#include "reports/bundle_view.h"

namespace sparkglm::reports {

inline constexpr size_t kCardWidth = 100;

std::string render_text_card(const BundleView& bundle);

}  // namespace sparkglm::reports
