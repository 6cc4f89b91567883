#pragma once
// The server's counters and the engine's gauges in Prometheus' text format (version 0.0.4).
// Counters are updated from the I/O threads; render() reads a consistent copy.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/runtime/serving_engine.h"

namespace sparkglm::server {

// Cumulative buckets with fixed upper bounds (seconds), as Prometheus expects.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // `name`_bucket{le=...}, `name`_sum and `name`_count lines.
  void render(std::string& out, const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // one per bound, plus +Inf; not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();

  // One response, labelled by route (an unknown path counts as "other") and status.
  void record_response(std::string_view path, int status);
  void connection_opened();
  void connection_closed();
  void connection_rejected();
  // One finished generation: why it ended ("stop", "length", "abort", "timeout", "error"), its
  // token counts, and its latencies as the server saw them.
  void record_generation(std::string_view finish, int prompt_tokens, int completion_tokens,
                         double first_token_seconds, double total_seconds);

  // Streams: for each event of one write, the time from the engine producing it (the token was
  // sampled) to its bytes being handed to the socket.
  void record_sse_emit_delays(const std::vector<double>& seconds);

  std::string render(const EngineStats& engine) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> responses_;
  std::map<std::string, uint64_t> finished_;
  int64_t connections_open_ = 0;
  uint64_t connections_total_ = 0, connections_rejected_ = 0;
  uint64_t request_prompt_tokens_ = 0, request_completion_tokens_ = 0;
  Histogram first_token_, request_duration_, sse_emit_delay_;
};

// The route label for a path: the path itself when it is one of the server's routes.
std::string_view route_label(std::string_view path);

}  // namespace sparkglm::server
