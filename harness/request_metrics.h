#pragma once
// QUALIFICATION.md's metric definitions ("Metrics", part of the contract), computed from
// RequestRecords alone so that anyone can recompute them from a bundle's requests.jsonl.
// Percentiles are nearest rank (harness/statistics.h). A metric that is undefined for a record
// (a failed request, one output token, no output event) is absent, never zero.
#include <optional>
#include <vector>

#include "harness/request_record.h"

namespace sparkglm::harness {

struct RequestMetrics {
  std::optional<double> ttft_s;           // first_output_s - start_s
  std::optional<double> first_visible_s;  // first_visible_s - start_s
  std::optional<double> latency_s;        // end_s - start_s
  // (completion_tokens - 1) / (last output event - first output event); needs >= 2 tokens and a
  // positive span.
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

// Σ(completion - 1) / (last end - first output) over the ok records of one group of concurrent
// requests (one repetition of a case). Absent when the group has a failed record, no output, or a
// span that is not positive: a run with errors is failed, not averaged over its survivors.
std::optional<double> aggregate_decode_tok_s(const std::vector<RequestRecord>& group);

// The client's own cost against the gaps it measures: the largest client_overhead_median_s of the
// ok records over the median of their pooled ITL. Far below 1 (say < 0.1) means the client's
// parsing cannot have delayed the events it timed. Absent without ok records or ITL gaps.
std::optional<double> client_overhead_to_itl(const std::vector<RequestRecord>& records);

}  // namespace sparkglm::harness
