#pragma once
// Text into HTML (and inline SVG): every character that could open a tag, an entity or leave an
// attribute value is replaced, so record text is shown as text and never parsed as markup.
#include <string>
#include <string_view>

namespace sparkglm::reports {

std::string escape_html(std::string_view text);

}  // namespace sparkglm::reports
