#include "reports/text_table.h"

#include <algorithm>

namespace sparkglm::reports {

namespace {

bool continuation(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

// Byte offset where the first `columns` code points of `text` end.
size_t prefix_bytes(std::string_view text, size_t columns) {
  size_t bytes = 0, seen = 0;
  while (bytes < text.size()) {
    if (!continuation(text[bytes])) {
      if (seen == columns) break;
      ++seen;
    }
    ++bytes;
  }
  return bytes;
}

}  // namespace

size_t display_width(std::string_view text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return !continuation(c); }));
}

std::string printable(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f) c = ' ';
  }
  return out;
}

std::string fit_width(std::string_view text, size_t width) {
  if (display_width(text) <= width) return std::string(text);
  if (width == 0) return "";
  return std::string(text.substr(0, prefix_bytes(text, width - 1))) + "~";
}

std::string pad_right(std::string_view text, size_t width) {
  std::string out(text);
  const size_t w = display_width(text);
  if (w < width) out.append(width - w, ' ');
  return out;
}

std::vector<std::string> wrap_words(std::string_view text, size_t width) {
  std::vector<std::string> lines;
  std::string line;
  size_t pos = 0;
  width = std::max<size_t>(width, 1);
  while (pos < text.size()) {
    while (pos < text.size() && text[pos] == ' ') ++pos;
    if (pos >= text.size()) break;
    size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view word = text.substr(pos, end - pos);
    pos = end;
    while (!word.empty()) {
      const size_t used = display_width(line);
      const size_t need = display_width(word) + (line.empty() ? 0 : 1);
      if (used + need <= width) {
        if (!line.empty()) line += ' ';
        line += word;
        break;
      }
      if (!line.empty()) {
        lines.push_back(line);
        line.clear();
        continue;
      }
      const size_t cut = prefix_bytes(word, width);  // a word wider than a whole line
      lines.emplace_back(word.substr(0, cut));
      word = word.substr(cut);
    }
  }
  if (!line.empty()) lines.push_back(line);
  if (lines.empty()) lines.emplace_back();
  return lines;
}

std::vector<std::string> table_lines(const std::vector<std::vector<std::string>>& rows,
                                     const std::vector<size_t>& max_widths, size_t indent) {
  size_t columns = 0;
  for (const auto& row : rows) columns = std::max(columns, row.size());
  std::vector<size_t> widths(columns, 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) {
      size_t w = display_width(row[i]);
      if (i < max_widths.size()) w = std::min(w, max_widths[i]);
      widths[i] = std::max(widths[i], w);
    }
  std::vector<std::string> lines;
  for (const auto& row : rows) {
    std::string line(indent, ' ');
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string cell = fit_width(row[i], widths[i]);
      line += i + 1 == row.size() ? cell : pad_right(cell, widths[i]) + "  ";
    }
    lines.push_back(line);
  }
  return lines;
}

}  // namespace sparkglm::reports
