#pragma once
// Fixed-width text layout for the card and the comparison: widths in columns (one per UTF-8 code
// point), cutting, word wrapping, and tables whose columns are padded to their widest cell.
#include <string>
#include <string_view>
#include <vector>

namespace sparkglm::reports {

size_t display_width(std::string_view text);
// Replaces control characters (newlines, escape sequences) with spaces: record text is data.
std::string printable(std::string_view text);
// `text` cut to `width` columns, ending in "~" when it had to be cut.
std::string fit_width(std::string_view text, size_t width);
std::string pad_right(std::string_view text, size_t width);
// Words of `text` in lines of at most `width` columns; a longer word is cut across lines.
std::vector<std::string> wrap_words(std::string_view text, size_t width);

// Rows of cells laid out in columns two spaces apart, each line prefixed by `indent` spaces;
// column i is at most max_widths[i] wide (cells cut to fit) when max_widths has an entry for it.
std::vector<std::string> table_lines(const std::vector<std::vector<std::string>>& rows,
                                     const std::vector<size_t>& max_widths, size_t indent);

}  // namespace sparkglm::reports
