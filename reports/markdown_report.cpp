#include "reports/markdown_report.h"

#include <algorithm>
#include <sstream>

#include "reports/metric_row.h"
#include "reports/report_facts.h"

namespace sparkglm::reports {

std::string markdown_escape(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    // "](" or "][" would close a link; a bracket elsewhere ("[min .. max]") is plain text.
    if (c == ']' && i + 1 < text.size() && (text[i + 1] == '(' || text[i + 1] == '[')) {
      out += "\\]";
      continue;
    }
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '\n':
      case '\r':
      case '\t':
        out += ' ';
        break;
      case '|':
      case '\\':
      case '`':
      case '*':
        out += '\\';
        out += c;
        break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) out += c;
    }
  }
  return out;
}

std::string markdown_table(const std::vector<std::string>& header,
                           const std::vector<std::vector<std::string>>& rows) {
  std::ostringstream out;
  auto row_line = [&](const std::vector<std::string>& cells) {
    out << '|';
    for (const std::string& cell : cells) out << ' ' << markdown_escape(cell) << " |";
    out << '\n';
  };
  row_line(header);
  out << '|';
  for (size_t i = 0; i < header.size(); ++i) out << "---|";
  out << '\n';
  for (const auto& row : rows) row_line(row);
  return out.str();
}

std::string render_markdown(const BundleView& bundle) {
  const nlohmann::json& record = bundle.record;
  const bool ab = has_baseline(record);
  const std::vector<MetricRow> metrics = metric_rows(record);
  std::ostringstream md;
  md << "# " << gate_headline(record) << ": " << markdown_escape(text_at(record, "title"))
     << "\n\n";
  md << markdown_table({"field", "value"}, summary_rows(record));

  md << "\n## System\n\n";
  md << markdown_table({"", ""}, system_rows(record));

  md << "\n## Results\n\nMedian [min .. max] over repetitions.\n\n";
  std::vector<std::vector<std::string>> results;
  for (const MetricRow& r : metrics) {
    std::vector<std::string> row = {r.cell(), r.name, r.unit, std::to_string(r.n),
                                    r.candidate ? format_range(*r.candidate) : "-"};
    if (ab) row.push_back(r.baseline ? format_range(*r.baseline) : "-");
    results.push_back(row);
  }
  md << (ab ? markdown_table({"case", "metric", "unit", "n", "candidate", "baseline"}, results)
            : markdown_table({"case", "metric", "unit", "n", "measured"}, results));

  md << "\n## Gates\n\n";
  md << markdown_table({"gate", "status", "summary", "criteria"}, gate_rows(record));

  if (ab) {
    md << "\n## A/B\n\nChange of the candidate's median; 95% bootstrap CI of the median ratio "
          "candidate / baseline; two-sided Mann-Whitney U p-value.\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const MetricRow& r : metrics)
      if (r.baseline)
        rows.push_back({r.cell(), r.name, r.direction, format_change_pct(r.change_pct),
                        format_ci(r.ci_lo, r.ci_hi), format_p(r.p), r.verdict});
    md << markdown_table({"case", "metric", "better", "change", "95% CI", "p", "verdict"}, rows);
  }

  md << "\n## Limitations\n\n";
  const std::vector<std::string> limits = limitations(record);
  if (limits.empty()) md << "None stated.\n";
  for (const std::string& l : limits) md << "- " << markdown_escape(l) << '\n';
  md << "\nReceipt: sha256 of qualification.json `" << bundle.qualification_sha256 << "`\n";
  return md.str();
}

}  // namespace sparkglm::reports
