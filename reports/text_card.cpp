#include "reports/text_card.h"

#include <algorithm>
#include <sstream>

#include "reports/metric_row.h"
#include "reports/report_facts.h"
#include "reports/text_table.h"

namespace sparkglm::reports {

namespace {

constexpr size_t kLabel = 10;  // width of the label column of "label     value" lines

class Card {
 public:
  void line(const std::string& text) { lines_.push_back(fit_width(printable(text), kCardWidth)); }
  void rule(char c) { lines_.emplace_back(kCardWidth, c); }
  void blank() { lines_.emplace_back(); }
  // "label     value", the value wrapped under itself.
  void labeled(const std::string& label, const std::string& value, size_t indent = 0) {
    // A label longer than the column ("G1  not-run") keeps one space before its value.
    const size_t width = std::max(kLabel, printable(label).size() + 1);
    const size_t column = indent + width;
    const auto wrapped = wrap_words(printable(value), kCardWidth - column);
    for (size_t i = 0; i < wrapped.size(); ++i)
      line(std::string(indent, ' ') + pad_right(i == 0 ? printable(label) : "", width) +
           wrapped[i]);
  }
  void wrapped(const std::string& text, size_t indent, size_t hanging) {
    const auto lines = wrap_words(printable(text), kCardWidth - indent - hanging);
    for (size_t i = 0; i < lines.size(); ++i)
      line(std::string(indent + (i == 0 ? 0 : hanging), ' ') + lines[i]);
  }
  void table(std::vector<std::vector<std::string>> rows, const std::vector<size_t>& max_widths,
             size_t indent) {
    for (auto& row : rows)
      for (auto& cell : row) cell = printable(cell);
    for (const std::string& l : table_lines(rows, max_widths, indent)) line(l);
  }
  std::string str() const {
    std::ostringstream out;
    for (const std::string& l : lines_) out << l << '\n';
    return out.str();
  }

 private:
  std::vector<std::string> lines_;
};

void results(Card& card, const std::vector<MetricRow>& rows, bool ab) {
  card.line(std::string("Results: median [min .. max] over repetitions") +
            (ab ? ", candidate and baseline" : ""));
  std::vector<std::string> cells;  // in order of first appearance
  for (const MetricRow& r : rows)
    if (std::find(cells.begin(), cells.end(), r.cell()) == cells.end()) cells.push_back(r.cell());
  for (const std::string& cell : cells) {
    card.line("  " + cell);
    std::vector<std::vector<std::string>> table = {
        ab ? std::vector<std::string>{"metric", "unit", "n", "candidate", "baseline"}
           : std::vector<std::string>{"metric", "unit", "n", "measured"}};
    for (const MetricRow& r : rows) {
      if (r.cell() != cell) continue;
      std::vector<std::string> row = {r.name, r.unit, std::to_string(r.n),
                                      r.candidate ? format_range(*r.candidate) : "-"};
      if (ab) row.push_back(r.baseline ? format_range(*r.baseline) : "-");
      table.push_back(row);
    }
    card.table(table, {24, 5, 3, 26, 26}, 4);
  }
  if (cells.empty()) card.line("  (no metrics)");
}

void gates(Card& card, const nlohmann::json& record) {
  card.line("Gates");
  const nlohmann::json* list = find_path(record, "gates");
  if (!list || !list->is_array() || list->empty()) {
    card.line("  (no gates recorded)");
    return;
  }
  for (const nlohmann::json& gate : *list) {
    std::string status = text_at(gate, "status");
    if (status == "fail") status = "FAIL";
    card.labeled(text_at(gate, "id") + "  " + status, text_at(gate, "summary", ""), 2);
    for (const std::string& c : criterion_lines(gate)) card.wrapped(c, 2 + kLabel, 7);
  }
}

void ab_rows(Card& card, const std::vector<MetricRow>& rows) {
  card.line("A/B: change of the candidate's median, 95% CI of candidate/baseline, Mann-Whitney p");
  std::vector<std::vector<std::string>> table = {
      {"case", "metric", "better", "change", "95% CI", "p", "verdict"}};
  for (const MetricRow& r : rows) {
    if (!r.baseline) continue;
    table.push_back({r.case_id.empty() ? r.workload : r.case_id, r.name, r.direction,
                     format_change_pct(r.change_pct), format_ci(r.ci_lo, r.ci_hi), format_p(r.p),
                     r.verdict});
  }
  card.table(table, {16, 26, 6, 8, 16, 6, 13}, 2);
}

}  // namespace

std::string render_text_card(const BundleView& bundle) {
  const nlohmann::json& record = bundle.record;
  const bool ab = has_baseline(record);
  const std::vector<MetricRow> rows = metric_rows(record);
  Card card;
  card.rule('=');
  card.line(gate_headline(record) + "  " + text_at(record, "level") + "  " +
            text_at(record, "title"));
  card.rule('=');
  card.labeled("id", text_at(record, "id"));
  card.labeled("state", text_at(record, "state") + ", level " + text_at(record, "level") +
                            ", created " + text_at(record, "created_at") + ", attestation " +
                            text_at(record, "attestation.status"));
  card.labeled("target", text_at(record, "target"));
  card.labeled("change", change_summary(record));
  card.blank();
  card.line("System");
  for (const auto& [label, value] : system_facts(record)) card.labeled(label, value, 2);
  for (const auto& [label, value] : arm_facts(record)) card.labeled(label, value, 2);
  const nlohmann::json* workloads = find_path(record, "workloads");
  if (workloads && workloads->is_array())
    for (const nlohmann::json& w : *workloads)
      card.labeled("workload",
                   text_at(w, "id") + ", scale " + text_at(w, "scale") + ", spec sha256 " +
                       text_at(w, "spec_sha256").substr(0, 12),
                   2);
  card.blank();
  results(card, rows, ab);
  card.blank();
  gates(card, record);
  if (ab) {
    card.blank();
    ab_rows(card, rows);
  }
  card.blank();
  card.line("Limitations");
  const std::vector<std::string> limits = limitations(record);
  if (limits.empty()) card.line("  (none stated)");
  for (const std::string& l : limits) card.wrapped("- " + l, 2, 2);
  card.rule('-');
  card.line("receipt sha256 " + bundle.qualification_sha256 + " (qualification.json)");
  return card.str();
}

}  // namespace sparkglm::reports
