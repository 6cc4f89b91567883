// The client's cost and delivery, and the server's counter and emit-delay deltas, as
// qualification.json records them (serving_evidence.h).
#include "gates/serving_evidence.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"
#include "harness/histogram_delta.h"
#include "harness/request_metrics.h"
#include "harness/server_api.h"
#include "harness/statistics.h"

namespace sparkglm::gates {

using nlohmann::json;

json client_cost(const std::vector<harness::RequestRecord>& records) {
  std::vector<double> overhead;
  double overhead_max = 0;
  for (const harness::RequestRecord& r : records)
    if (r.ok && r.client_overhead_median_s > 0) {
      overhead.push_back(r.client_overhead_median_s);
      overhead_max = std::max(overhead_max, r.client_overhead_max_s);
    }
  const auto share = harness::client_overhead_to_itl(records);
  // The callback's clock sees parsing and recording only; the load thread also spends CPU in
  // libcurl and the socket for every event, so its whole thread CPU time is recorded beside it.
  const std::vector<double> cpu = harness::thread_cpu_per_event_s(records);
  const harness::DeliverySummary d = harness::delivery_summary(records);
  return {
      {"overhead_per_event_median_s", overhead.empty() ? 0.0 : harness::median(overhead)},
      {"overhead_per_event_max_s", overhead_max},
      {"worst_median_overhead_over_median_itl", share ? json(*share) : json(nullptr)},
      {"thread_cpu_per_event_median_s", cpu.empty() ? json(nullptr) : json(harness::median(cpu))},
      {"thread_cpu_per_event_max_s",
       cpu.empty() ? json(nullptr) : json(*std::max_element(cpu.begin(), cpu.end()))},
      {"delivery",
       {{"reads_with_output", d.reads},
        {"output_events", d.events},
        {"max_events_per_read", d.max_events_per_read},
        {"p99_events_per_read", d.p99_events_per_read},
        {"bursty", d.bursty()}}}};
}

std::optional<std::string> bursty_delivery_warning(
    const std::vector<harness::RequestRecord>& records) {
  const harness::DeliverySummary d = harness::delivery_summary(records);
  if (!d.bursty()) return std::nullopt;
  return "bursty delivery: " + std::to_string(d.events) + " output events reached the client in " +
         std::to_string(d.reads) + " socket reads (p99 " + std::to_string(d.p99_events_per_read) +
         ", max " + std::to_string(d.max_events_per_read) +
         " events in one read); the client's event times (ITL, decode rate, SSE gaps) then "
         "measure the batching, not the server's pace";
}

json counter_deltas(const std::string& before_text, const std::string& after_text) {
  json out = json::object();
  try {
    const auto before = harness::parse_prometheus_text(before_text);
    for (const auto& [name, value] : harness::parse_prometheus_text(after_text)) {
      const size_t brace = name.find('{');
      const std::string base = name.substr(0, brace);
      if (base.size() < 6 || base.compare(base.size() - 6, 6, "_total") != 0) continue;
      const auto it = before.find(name);
      out[name] = value - (it == before.end() ? 0.0 : it->second);
    }
  } catch (const Error& e) {
    out["error"] = e.what();  // a malformed scrape is recorded, not hidden
  }
  return out;
}

json emit_delay(const std::string& before_text, const std::string& after_text) {
  try {
    const auto h = harness::histogram_delta(harness::parse_prometheus_text(before_text),
                                            harness::parse_prometheus_text(after_text),
                                            "sparkglm_sse_emit_delay_seconds");
    if (!h) return nullptr;
    auto bound = [&](double q) {
      const double b = h->quantile_bound(q);
      return std::isfinite(b) ? json(b) : json("+Inf");
    };
    json buckets = json::array();
    for (const auto& [le, n] : h->buckets)
      buckets.push_back({std::isfinite(le) ? json(le) : json("+Inf"), n});
    return {{"count", h->count},
            {"mean_s", h->count > 0 ? json(h->sum / h->count) : json(nullptr)},
            {"p50_le_s", bound(0.50)},
            {"p90_le_s", bound(0.90)},
            {"p99_le_s", bound(0.99)},
            {"buckets", std::move(buckets)}};
  } catch (const Error& e) {
    return {{"error", e.what()}};  // a malformed scrape is recorded, not hidden
  }
}

}  // namespace sparkglm::gates
