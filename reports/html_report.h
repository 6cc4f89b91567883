#pragma once
// The bundle as one self-contained HTML page: inline CSS and inline SVG only (no script, no
// external URL, and a Content-Security-Policy that forbids both), so the page can be archived and
// opened anywhere. Per case it charts the TTFT and decode-rate distributions of every request in
// requests.jsonl, per arm; with a baseline it charts each metric's ratio with its CI whiskers.
// All record text is escaped.
#include <string>

#include "reports/bundle_view.h"

namespace sparkglm::reports {

std::string render_html(const BundleView& bundle);

}  // namespace sparkglm::reports
