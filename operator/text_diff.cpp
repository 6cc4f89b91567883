#include "operator/text_diff.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sparkglm::operator_tool {

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

struct Edit {
  char op;      // ' ', '-', '+'
  size_t a, b;  // line index in old / new (of the line itself, or where it would go)
};

// Longest common subsequence by dynamic programming: profiles are a few hundred lines. Past the
// size where the table would be large, the whole text is shown as replaced.
std::vector<Edit> edits(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<Edit> out;
  if (a.size() * b.size() > 16'000'000) {
    for (size_t i = 0; i < a.size(); ++i) out.push_back({'-', i, 0});
    for (size_t j = 0; j < b.size(); ++j) out.push_back({'+', a.size(), j});
    return out;
  }
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<uint32_t>> lcs(n + 1, std::vector<uint32_t>(m + 1, 0));
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      out.push_back({' ', i++, j++});
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      out.push_back({'-', i++, j});  // removals first, as diff -u shows them
    } else {
      out.push_back({'+', i, j++});
    }
  }
  return out;
}

}  // namespace

std::string unified_diff(const std::string& old_text, const std::string& new_text,
                         const std::string& old_label, const std::string& new_label, int context) {
  if (old_text == new_text) return "";
  const std::vector<std::string> a = lines_of(old_text), b = lines_of(new_text);
  const std::vector<Edit> e = edits(a, b);
  std::string out = "--- " + old_label + "\n+++ " + new_label + "\n";
  const size_t ctx = size_t(std::max(context, 0));
  size_t k = 0;
  while (k < e.size()) {
    if (e[k].op == ' ') {
      ++k;
      continue;
    }
    // A hunk: from `ctx` lines before this change to `ctx` lines after the last change that is
    // within 2*ctx unchanged lines of the next.
    const size_t begin = k >= ctx ? k - ctx : 0;
    size_t last_change = k;
    for (size_t t = k; t < e.size(); ++t) {
      if (e[t].op != ' ')
        last_change = t;
      else if (t - last_change > 2 * ctx)
        break;
    }
    const size_t end = std::min(e.size(), last_change + 1 + ctx);
    size_t old_count = 0, new_count = 0;
    for (size_t t = begin; t < end; ++t) {
      if (e[t].op != '+') ++old_count;
      if (e[t].op != '-') ++new_count;
    }
    const size_t old_start = e[begin].a + (old_count ? 1 : 0);
    const size_t new_start = e[begin].b + (new_count ? 1 : 0);
    out += "@@ -" + std::to_string(old_start) + "," + std::to_string(old_count) + " +" +
           std::to_string(new_start) + "," + std::to_string(new_count) + " @@\n";
    for (size_t t = begin; t < end; ++t) {
      const std::string& line = e[t].op == '+' ? b[e[t].b] : a[e[t].a];
      out += std::string(1, e[t].op) + line + "\n";
    }
    k = end;
  }
  return out;
}

}  // namespace sparkglm::operator_tool
