#include "engine/server/metrics.h"

#include <cstdio>

namespace sparkglm::server {

namespace {

constexpr std::string_view kRoutes[] = {
    "/v1/chat/completions", "/v1/completions", "/v1/models", "/tokenize",
    "/detokenize",          "/health",         "/metrics"};

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, const std::string& name, double v) {
  out += name;
  out += ' ';
  out += number(v);
  out += '\n';
}

// A metric of one unlabelled sample: its header and its value under one name.
void metric(std::string& out, const char* name, const char* type, const char* help, double v) {
  header(out, name, type, help);
  sample(out, name, v);
}

// Speculative decoding (engine/runtime/speculation/speculator.h): acceptance of draft position i
// is accepted{position=i} / draft{position=i}; tokens per verify step is verify_tokens over
// verify_steps. Bundles record every _total counter's change over a run.
void render_speculation(std::string& out, const SpeculationCounters& s) {
  header(out, "sparkglm_spec_draft_tokens_total", "counter",
         "Draft tokens proposed, by position (1: the first after the sequence's last token).");
  for (size_t i = 0; i < s.drafted.size(); ++i)
    sample(out, "sparkglm_spec_draft_tokens_total{position=\"" + std::to_string(i + 1) + "\"}",
           double(s.drafted[i]));
  header(out, "sparkglm_spec_accepted_tokens_total", "counter",
         "Draft tokens accepted (with every draft before them), by position.");
  for (size_t i = 0; i < s.accepted.size(); ++i)
    sample(out, "sparkglm_spec_accepted_tokens_total{position=\"" + std::to_string(i + 1) + "\"}",
           double(s.accepted[i]));
  metric(out, "sparkglm_spec_verify_steps_total", "counter",
         "Verify slices with at least one draft (one per sequence and engine step).",
         double(s.verify_steps));
  metric(out, "sparkglm_spec_verify_tokens_total", "counter",
         "Tokens committed by those verify slices (accepted drafts plus one).",
         double(s.verify_tokens));
  metric(out, "sparkglm_spec_draft_failures_total", "counter",
         "Drafter calls that failed (their sequences went on without drafts).",
         double(s.draft_failures));
  metric(out, "sparkglm_spec_replayed_rows_total", "counter",
         "Rows run again to roll back rejected drafts (--speculative-rollback recompute).",
         double(s.replayed_rows));
}

}  // namespace

std::string_view route_label(std::string_view path) {
  for (std::string_view r : kRoutes)
    if (r == path) return r;
  return "other";
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? number(bounds_[i]) : "+Inf";
    out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  sample(out, name + "_sum", sum_);
  out += name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : first_token_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      request_duration_({0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}),
      // Fine below a millisecond, where a token that leaves when it is made lands.
      sse_emit_delay_({25e-6, 50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 25e-3, 50e-3,
                       0.1, 0.25, 1}) {}

void Metrics::record_response(std::string_view path, int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++responses_[{std::string(route_label(path)), status}];
}

void Metrics::connection_opened() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++connections_open_;
  ++connections_total_;
}

void Metrics::connection_closed() {
  std::lock_guard<std::mutex> lock(mutex_);
  --connections_open_;
}

void Metrics::connection_rejected() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++connections_rejected_;
}

void Metrics::record_generation(std::string_view finish, int prompt_tokens, int completion_tokens,
                                double first_token_seconds, double total_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++finished_[std::string(finish)];
  request_prompt_tokens_ += uint64_t(prompt_tokens);
  request_completion_tokens_ += uint64_t(completion_tokens);
  if (first_token_seconds >= 0) first_token_.observe(first_token_seconds);
  request_duration_.observe(total_seconds);
}

void Metrics::record_sse_emit_delays(const std::vector<double>& seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (double v : seconds) sse_emit_delay_.observe(v);
}

std::string Metrics::render(const EngineStats& e) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  header(out, "sparkglm_http_requests_total", "counter", "HTTP responses by route and status.");
  for (const auto& [key, n] : responses_)
    out += "sparkglm_http_requests_total{route=\"" + key.first + "\",status=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
  metric(out, "sparkglm_http_connections_open", "gauge", "Open client connections.",
         double(connections_open_));
  metric(out, "sparkglm_http_connections_total", "counter", "Connections accepted.",
         double(connections_total_));
  metric(out, "sparkglm_http_connections_rejected_total", "counter",
         "Connections refused with 503 at --max-connections.", double(connections_rejected_));

  header(out, "sparkglm_requests_finished_total", "counter",
         "Generation requests by finish reason.");
  for (const auto& [reason, n] : finished_)
    out += "sparkglm_requests_finished_total{finish_reason=\"" + reason + "\"} " +
           std::to_string(n) + "\n";
  metric(out, "sparkglm_request_prompt_tokens_total", "counter",
         "Prompt tokens of finished generation requests.", double(request_prompt_tokens_));
  metric(out, "sparkglm_request_generation_tokens_total", "counter",
         "Generated tokens of finished generation requests.", double(request_completion_tokens_));
  header(out, "sparkglm_time_to_first_token_seconds", "histogram",
         "From a request's arrival to its first generated token.");
  first_token_.render(out, "sparkglm_time_to_first_token_seconds");
  header(out, "sparkglm_request_duration_seconds", "histogram",
         "From a request's arrival to its last event.");
  request_duration_.render(out, "sparkglm_request_duration_seconds");
  header(out, "sparkglm_sse_emit_delay_seconds", "histogram",
         "Streams: from the engine sampling a token to its event's bytes reaching the socket.");
  sse_emit_delay_.render(out, "sparkglm_sse_emit_delay_seconds");

  metric(out, "sparkglm_prompt_tokens_total", "counter", "Prompt tokens the engine processed.",
         double(e.prompt_tokens));
  metric(out, "sparkglm_generation_tokens_total", "counter", "Tokens the engine generated.",
         double(e.generated_tokens));
  metric(out, "sparkglm_num_requests_waiting", "gauge", "Requests queued for admission.",
         double(e.waiting));
  metric(out, "sparkglm_num_requests_running", "gauge", "Requests admitted and running.",
         double(e.running));
  metric(out, "sparkglm_kv_blocks_used", "gauge", "KV pool blocks in use.",
         double(e.total_blocks - e.free_blocks));
  metric(out, "sparkglm_kv_blocks_total", "gauge", "KV pool blocks.", double(e.total_blocks));
  metric(out, "sparkglm_kv_block_size_tokens", "gauge", "Tokens per KV block.",
         double(e.block_size));
  metric(out, "sparkglm_num_preemptions_total", "counter",
         "Running requests preempted (recomputed later) because the KV pool ran out.",
         double(e.preemptions));
  metric(out, "sparkglm_prefix_cache_hits_total", "counter",
         "Admissions that resumed from the prefix cache (blocks and a KDA snapshot).",
         double(e.prefix_hits));
  metric(out, "sparkglm_prefix_cache_hit_tokens_total", "counter",
         "Prompt tokens served from the prefix cache instead of prefilled.",
         double(e.prefix_hit_tokens));
  metric(out, "sparkglm_prefix_cache_evictions_total", "counter",
         "Cached KV blocks evicted to make room for new ones.", double(e.prefix_block_evictions));
  metric(out, "sparkglm_prefix_cache_snapshots_saved_total", "counter",
         "KDA state snapshots the prefix cache saved.", double(e.prefix_snapshots_saved));
  metric(out, "sparkglm_prefix_cache_snapshot_evictions_total", "counter",
         "KDA state snapshots evicted (least recently used) for newer ones.",
         double(e.prefix_snapshot_evictions));
  const PrefixCacheCounters& p = e.prefix;
  metric(out, "sparkglm_prefix_cache_answer_tokens_total", "counter",
         "Tokens prefilled again after a request finished so that its answer is cached for the "
         "conversation's next turn.",
         double(p.answer_tokens));
  metric(out, "sparkglm_prefix_cache_spilled_blocks_total", "counter",
         "Evicted KV blocks spilled to the disk tier (queued for its writer thread).",
         double(p.spilled_blocks));
  metric(out, "sparkglm_prefix_cache_spilled_snapshots_total", "counter",
         "Evicted KDA snapshots spilled to the disk tier (queued for its writer thread).",
         double(p.spilled_snapshots));
  metric(out, "sparkglm_prefix_cache_spill_bytes_total", "counter",
         "Bytes spilled to the disk tier.", double(p.spill_bytes));
  metric(out, "sparkglm_prefix_cache_spill_seconds_total", "counter",
         "Engine-thread time spent spilling: waiting for a free staging buffer and the host "
         "copy (the file write runs on the disk tier's writer thread).",
         p.spill_seconds);
  metric(out, "sparkglm_prefix_cache_restored_blocks_total", "counter",
         "KV blocks read back from the disk tier for a hit.", double(p.restored_blocks));
  metric(out, "sparkglm_prefix_cache_restored_snapshots_total", "counter",
         "KDA snapshots read back from the disk tier for a hit.", double(p.restored_snapshots));
  metric(out, "sparkglm_prefix_cache_restore_bytes_total", "counter",
         "Bytes read back from the disk tier.", double(p.restore_bytes));
  metric(out, "sparkglm_prefix_cache_restore_seconds_total", "counter",
         "Time spent restoring (read and host copy), on the engine thread.", p.restore_seconds);
  metric(out, "sparkglm_prefix_cache_disk_errors_total", "counter",
         "Disk-tier spills and restores that failed (an I/O error, or a record pushed out by "
         "the spills that made room for its own restore); a failed restore is a miss.",
         double(p.disk_errors));
  metric(out, "sparkglm_prefix_cache_blocks", "gauge",
         "KV blocks held by the prefix cache alone (free for new requests on demand).",
         double(e.prefix_cached_blocks));
  render_speculation(out, e.speculation);
  metric(out, "sparkglm_engine_steps_total", "counter", "Engine steps run.", double(e.steps));
  header(out, "sparkglm_engine_step_seconds", "summary", "Time of one engine step.");
  sample(out, "sparkglm_engine_step_seconds_sum", e.total_step_seconds);
  sample(out, "sparkglm_engine_step_seconds_count", double(e.steps));
  metric(out, "sparkglm_engine_last_step_seconds", "gauge", "Time of the latest engine step.",
         e.last_step_seconds);
  metric(out, "sparkglm_engine_fatal", "gauge",
         "1 once a device fault stopped the engine: the server drains and exits non-zero, and "
         "/health gives the reason.",
         e.fatal.empty() ? 0.0 : 1.0);
  return out;
}

}  // namespace sparkglm::server
