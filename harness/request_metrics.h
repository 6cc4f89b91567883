#pragma once
// QUALIFICATION.md's metric definitions ("Metrics", part of the contract), computed from
// RequestRecords alone so that anyone can recompute them from a bundle's requests.jsonl.
// Percentiles are nearest rank (harness/statistics.h). A metric that is undefined for a record
// (a failed request, one output token, no output event) is absent, never zero.
#include <cstdint>
#include <optional>
#include <vector>

#include "harness/request_record.h"

namespace sparkglm::harness {

struct RequestMetrics {
  std::optional<double> ttft_s;     // first_output_s - start_s: time to the first token
  std::optional<double> ttfv_s;     // first_visible_s - start_s: time to the first visible text
  std::optional<double> latency_s;  // end_s - start_s
  // The per-request decode rate: (completion_tokens - 1) / (last output event - first output
  // event), both keyed to tokens; needs >= 2 tokens and a positive span.
  std::optional<double> decode_tok_s;
  std::optional<double> tpot_s;  // (latency - TTFT) / (completion_tokens - 1)
  // prompt_tokens / TTFT; TTFT includes queueing, so this is a user's view, not the kernel's.
  std::optional<double> prefill_tok_s;
  std::vector<double> itl_s;            // gaps between consecutive output events
  std::optional<double> sse_gap_p95_s;  // nearest-rank p95 of itl_s
  std::optional<double> sse_gap_max_s;
};

// Empty (all absent) for a record that is not ok.
RequestMetrics request_metrics(const RequestRecord& r);

// The ITL gaps of every ok record, pooled in record order.
std::vector<double> pooled_itl_s(const std::vector<RequestRecord>& records);

// Output throughput: Σ completion_tokens / (last end - first start) over one group of requests
// (one repetition of a case): what a user of the server gets, prefill, queueing and the client's
// own gaps included. It is not a decode rate (that is decode_tok_s, per request); bundles before
// this name had `aggregate_decode_tok_s`, Σ(completion - 1) over (last end - first output), a
// window that held later requests' prefill and client idle time under a decode name. Absent when
// the group has a failed record, no tokens, or a span that is not positive: a run with errors is
// failed, not averaged over its survivors.
std::optional<double> output_throughput_tok_s(const std::vector<RequestRecord>& group);

// How the server's events reached the client, over the ok records: socket reads that completed
// an output event, those events, and the largest and p99 (nearest rank) events per such read.
struct DeliverySummary {
  int64_t reads = 0;
  int64_t events = 0;
  int32_t max_events_per_read = 0;
  int32_t p99_events_per_read = 0;
  // Bursty: more than 1 % of reads held more than one output event, so p99 > 1. Tokens that leave
  // the server as they are made arrive one per read; a burst compresses the event times the
  // client measures (ITL, decode rate) into fiction.
  bool bursty() const { return p99_events_per_read > 1; }
};
DeliverySummary delivery_summary(const std::vector<RequestRecord>& records);

// The load threads' whole CPU time per output event (client_thread_cpu_s / output events), one
// value per ok record with output events; records that predate client_thread_cpu_s give none.
std::vector<double> thread_cpu_per_event_s(const std::vector<RequestRecord>& records);

// The client's own cost against the gaps it measures: the largest client_overhead_median_s of the
// ok records over the median of their pooled ITL. Far below 1 (say < 0.1) means the client's
// parsing cannot have delayed the events it timed. Absent without ok records or ITL gaps.
std::optional<double> client_overhead_to_itl(const std::vector<RequestRecord>& records);

}  // namespace sparkglm::harness
