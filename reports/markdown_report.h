#pragma once
// The bundle as Markdown: the card's content in tables. Record text is escaped so that a title or
// a summary cannot break a table or inject HTML into a rendered page.
#include <string>
#include <string_view>
#include <vector>

#include "reports/bundle_view.h"

namespace sparkglm::reports {

std::string render_markdown(const BundleView& bundle);

// One table cell: `|`, `\`, backticks, `*`, a `]` that would close a link, and HTML's `<`, `>`,
// `&` escaped; line breaks become spaces.
std::string markdown_escape(std::string_view text);
std::string markdown_table(const std::vector<std::string>& header,
                           const std::vector<std::vector<std::string>>& rows);

}  // namespace sparkglm::reports
