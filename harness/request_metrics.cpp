#include "harness/request_metrics.h"

#include <algorithm>
#include <limits>

#include "harness/statistics.h"

namespace sparkglm::harness {

RequestMetrics request_metrics(const RequestRecord& r) {
  RequestMetrics m;
  if (!r.ok) return m;
  m.latency_s = r.end_s - r.start_s;
  if (r.first_visible_s) m.ttfv_s = *r.first_visible_s - r.start_s;
  if (r.first_output_s) {
    const double ttft = *r.first_output_s - r.start_s;
    m.ttft_s = ttft;
    if (ttft > 0 && r.prompt_tokens > 0) m.prefill_tok_s = r.prompt_tokens / ttft;
    if (r.completion_tokens >= 2) m.tpot_s = (*m.latency_s - ttft) / (r.completion_tokens - 1);
  }
  const std::vector<double>& t = r.output_event_s;
  if (!t.empty() && r.completion_tokens >= 2) {
    const double span = t.back() - t.front();
    if (span > 0) m.decode_tok_s = (r.completion_tokens - 1) / span;
  }
  for (size_t i = 1; i < t.size(); ++i) m.itl_s.push_back(t[i] - t[i - 1]);
  if (!m.itl_s.empty()) {
    m.sse_gap_p95_s = percentile_nearest_rank(m.itl_s, 95);
    m.sse_gap_max_s = *std::max_element(m.itl_s.begin(), m.itl_s.end());
  }
  return m;
}

std::vector<double> pooled_itl_s(const std::vector<RequestRecord>& records) {
  std::vector<double> gaps;
  for (const RequestRecord& r : records) {
    if (!r.ok) continue;
    for (size_t i = 1; i < r.output_event_s.size(); ++i)
      gaps.push_back(r.output_event_s[i] - r.output_event_s[i - 1]);
  }
  return gaps;
}

std::optional<double> output_throughput_tok_s(const std::vector<RequestRecord>& group) {
  double first_start = std::numeric_limits<double>::infinity();
  double last_end = -std::numeric_limits<double>::infinity();
  double tokens = 0;
  for (const RequestRecord& r : group) {
    if (!r.ok) return std::nullopt;
    first_start = std::min(first_start, r.start_s);
    last_end = std::max(last_end, r.end_s);
    tokens += std::max(0, r.completion_tokens);
  }
  const double span = last_end - first_start;
  if (!(span > 0) || tokens <= 0) return std::nullopt;
  return tokens / span;
}

DeliverySummary delivery_summary(const std::vector<RequestRecord>& records) {
  DeliverySummary d;
  std::vector<double> per_read;
  for (const RequestRecord& r : records) {
    if (!r.ok) continue;
    for (int32_t n : r.events_per_read) {
      if (n <= 0) continue;
      per_read.push_back(n);
      d.events += n;
      d.max_events_per_read = std::max(d.max_events_per_read, n);
    }
  }
  d.reads = int64_t(per_read.size());
  if (!per_read.empty()) d.p99_events_per_read = int32_t(percentile_nearest_rank(per_read, 99));
  return d;
}

std::vector<double> thread_cpu_per_event_s(const std::vector<RequestRecord>& records) {
  std::vector<double> out;
  for (const RequestRecord& r : records)
    if (r.ok && r.client_thread_cpu_s > 0 && !r.output_event_s.empty())
      out.push_back(r.client_thread_cpu_s / double(r.output_event_s.size()));
  return out;
}

std::optional<double> client_overhead_to_itl(const std::vector<RequestRecord>& records) {
  const std::vector<double> gaps = pooled_itl_s(records);
  if (gaps.empty()) return std::nullopt;
  double overhead = 0;
  for (const RequestRecord& r : records)
    if (r.ok) overhead = std::max(overhead, r.client_overhead_median_s);
  const double itl = median(gaps);
  if (!(itl > 0)) return std::nullopt;
  return overhead / itl;
}

}  // namespace sparkglm::harness
