#include "reports/html_report.h"

#include <algorithm>
#include <sstream>

#include "reports/html_escape.h"
#include "reports/metric_row.h"
#include "reports/report_facts.h"
#include "reports/request_samples.h"
#include "reports/svg_chart.h"

namespace sparkglm::reports {

namespace {

constexpr const char* kStyle = R"(
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1000px; padding: 16px;
       color: #1d1d1d; background: #fafafa; }
header { padding: 10px 16px; border-radius: 6px; color: #ffffff; }
header.pass { background: #2e7d32; } header.fail { background: #c62828; }
header.incomplete { background: #8d6e00; }
h1 { margin: 0; font-size: 22px; } h2 { margin-top: 28px; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 8px 0; background: #fff; font-size: 13px; }
th, td { border: 1px solid #d0d0d0; padding: 3px 8px; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.better { color: #2e7d32; font-weight: 600; } .worse { color: #c62828; font-weight: 600; }
.chart { display: block; margin: 8px 0; border: 1px solid #ddd; }
.chart .heading { font: 600 13px system-ui, sans-serif; }
.chart .label { font: 12px system-ui, sans-serif; } .chart .tick { font: 11px system-ui, sans-serif; }
code { font-size: 12px; word-break: break-all; }
)";

std::string esc(const std::string& text) {
  return escape_html(text);
}

void table(std::ostringstream& h, const std::vector<std::string>& header,
           const std::vector<std::vector<std::string>>& rows, size_t first_numeric = 99) {
  h << "<table>";
  if (std::any_of(header.begin(), header.end(), [](const std::string& c) { return !c.empty(); })) {
    h << "<thead><tr>";
    for (const std::string& c : header) h << "<th>" << esc(c) << "</th>";
    h << "</tr></thead>";
  }
  h << "<tbody>";
  for (const auto& row : rows) {
    h << "<tr>";
    for (size_t i = 0; i < row.size(); ++i) {
      const bool verdict = row[i] == "better" || row[i] == "worse" || row[i] == "neutral-noisy";
      if (verdict)
        h << "<td class=\"" << row[i] << "\">";
      else
        h << (i >= first_numeric ? "<td class=\"num\">" : "<td>");
      h << esc(row[i]) << "</td>";
    }
    h << "</tr>";
  }
  h << "</tbody></table>";
}

std::string arm_label(const std::string& arm) {
  return arm.empty() ? "measured" : arm;
}

void distributions(std::ostringstream& h, const BundleView& bundle) {
  h << "<section id=\"distributions\"><h2>Distributions per case</h2>";
  const std::vector<CaseSamples> cases = case_samples(bundle.requests);
  if (cases.empty())
    h << "<p>No timed requests in requests.jsonl (warmups are not drawn).</p>";
  else
    h << "<p>Every timed request is a dot (warmups left out); the box spans the quartiles, the "
         "thick line is the median and the whiskers reach the minimum and maximum "
         "(nearest-rank).</p>";
  for (size_t i = 0; i < cases.size(); ++i) {
    const CaseSamples& c = cases[i];
    std::vector<DistributionSeries> ttft, decode;
    std::string counts;
    for (const ArmSamples& a : c.arms) {
      ttft.push_back({arm_label(a.arm), a.ttft_ms});
      decode.push_back({arm_label(a.arm), a.decode_tok_s});
      counts += (counts.empty() ? "" : "; ") + arm_label(a.arm) + ": " + std::to_string(a.ok) +
                " ok, " + std::to_string(a.failed) + " failed";
    }
    h << "<div class=\"cell\" id=\"case-" << i + 1 << "\"><h3>" << esc(c.cell()) << "</h3><p>"
      << esc(counts) << "</p>" << distribution_chart("TTFT per request, " + c.cell(), "ms", ttft)
      << distribution_chart("Decode rate per request, " + c.cell(), "tok/s", decode) << "</div>";
  }
  h << "</section>";
}

void ab_section(std::ostringstream& h, const std::vector<MetricRow>& metrics) {
  h << "<section id=\"ab\"><h2>A/B: candidate / baseline</h2>"
       "<p>Ratio of the medians with the 95% bootstrap CI of the median ratio as whiskers; the "
       "dashed line is no change. Whether above 1.0 is better depends on the metric's "
       "direction.</p>";
  std::vector<RatioPoint> points;
  std::vector<std::vector<std::string>> rows;
  for (const MetricRow& r : metrics) {
    if (!r.baseline) continue;
    const std::string note = format_change_pct(r.change_pct) + " " + format_ci(r.ci_lo, r.ci_hi);
    points.push_back({(r.case_id.empty() ? r.cell() : r.case_id) + " / " + r.name,
                      r.ratio().value_or(NAN), r.ci_lo, r.ci_hi, r.verdict, note});
    rows.push_back({r.cell(), r.name, r.direction, format_range(*r.baseline),
                    r.candidate ? format_range(*r.candidate) : "-", format_change_pct(r.change_pct),
                    format_ci(r.ci_lo, r.ci_hi), format_p(r.p), r.verdict});
  }
  h << ratio_chart("A/B ratios with 95% CI", points);
  table(h,
        {"case", "metric", "better", "baseline", "candidate", "change", "95% CI", "p", "verdict"},
        rows, 3);
  h << "</section>";
}

}  // namespace

std::string render_html(const BundleView& bundle) {
  const nlohmann::json& record = bundle.record;
  const std::string headline = gate_headline(record);
  const bool ab = has_baseline(record);
  const std::vector<MetricRow> metrics = metric_rows(record);
  std::string css_class = headline == "PASS" ? "pass" : headline == "FAIL" ? "fail" : "incomplete";
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
       "style-src 'unsafe-inline'\">"
    << "<title>" << esc(headline + ": " + text_at(record, "title")) << "</title><style>" << kStyle
    << "</style></head><body>\n";
  h << "<header class=\"" << css_class << "\"><h1>" << esc(headline) << " &middot; "
    << esc(text_at(record, "level")) << " &middot; " << esc(text_at(record, "title"))
    << "</h1></header>\n<section id=\"summary\">";
  table(h, {"field", "value"}, summary_rows(record));
  h << "</section>\n<section id=\"system\"><h2>System</h2>";
  table(h, {"", ""}, system_rows(record));
  h << "</section>\n<section id=\"results\"><h2>Results</h2>"
       "<p>Median [min .. max] over repetitions.</p>";
  std::vector<std::vector<std::string>> results;
  for (const MetricRow& r : metrics) {
    std::vector<std::string> row = {r.cell(), r.name, r.unit, std::to_string(r.n),
                                    r.candidate ? format_range(*r.candidate) : "-"};
    if (ab) row.push_back(r.baseline ? format_range(*r.baseline) : "-");
    results.push_back(row);
  }
  if (ab)
    table(h, {"case", "metric", "unit", "n", "candidate", "baseline"}, results, 3);
  else
    table(h, {"case", "metric", "unit", "n", "measured"}, results, 3);
  h << "</section>\n";
  distributions(h, bundle);
  h << "\n";
  if (ab) ab_section(h, metrics);
  h << "\n<section id=\"gates\"><h2>Gates</h2>";
  table(h, {"gate", "status", "summary", "criteria"}, gate_rows(record));
  h << "</section>\n<section id=\"limitations\"><h2>Limitations</h2><ul>";
  for (const std::string& l : limitations(record)) h << "<li>" << esc(l) << "</li>";
  h << "</ul></section>\n<footer><p>Receipt: sha256 of qualification.json <code>"
    << esc(bundle.qualification_sha256) << "</code></p></footer>\n</body></html>\n";
  return h.str();
}

}  // namespace sparkglm::reports
