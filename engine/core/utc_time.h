#pragma once
// The wall-clock time as bundles, records and operator state write it: UTC, ISO 8601, to the
// second ("2026-12-02T11:40:00Z").
#include <string>

namespace sparkglm {

std::string utc_now_iso8601();

}  // namespace sparkglm
