#pragma once
// What the client observed for one request: every time is seconds on the monotonic clock since the
// run's epoch, taken when the event's bytes arrived. One RequestRecord is one line of the bundle's
// `requests.jsonl`; metrics are recomputed from these and nothing else.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sparkglm::harness {

// A tool call the server returned (a chat delta's tool_calls entry): the function's name and its
// arguments as the JSON text the server sent.
struct ToolCallRecord {
  std::string name;
  std::string arguments;
  bool operator==(const ToolCallRecord&) const = default;
};

struct RequestRecord {
  // Identity (copied from the RequestSpec).
  std::string arm;  // "baseline" / "candidate" / "" for a single-arm run
  std::string workload;
  std::string case_id;
  int32_t repetition = 0;
  int32_t index = 0;
  std::string marker;

  // Times (seconds since the run epoch, monotonic).
  double start_s = 0;  // just before the request bytes were handed to the socket
  // The first event carrying a token: token ids, content or reasoning (TTFT). On byte-level output
  // a token may carry no text, so this is keyed to the token, not to the first visible byte.
  std::optional<double> first_output_s;
  std::optional<double> first_visible_s;  // first event carrying content (TTFV)
  std::vector<double> output_event_s;     // every SSE event that carried a token or text
  double end_s = 0;                       // "data: [DONE]" (or the failure)

  // Outcome.
  bool ok = false;
  int32_t http_status = 0;
  std::string error;          // "" when ok; otherwise what went wrong (timeout, HTTP 400: ..., ...)
  std::string finish_reason;  // "stop" / "length" / ...
  int32_t prompt_tokens = 0;  // from the usage chunk
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;
  int32_t reasoning_tokens = 0;
  std::vector<int32_t> token_ids;          // from return_token_ids
  std::string output_text;                 // the concatenated content deltas
  std::string reasoning_text;              // the concatenated reasoning deltas
  std::vector<ToolCallRecord> tool_calls;  // in the order the deltas brought them
  std::string output_sha256;               // of output_text
  std::string reasoning_sha256;            // of reasoning_text
  std::string token_ids_sha256;  // of the ids as decimal text joined by "," (the G2 identity)
  // Of every chunk's `logprobs` value as received, joined ("" when the request asked for none):
  // equal hashes mean the server sent the same logprob bits at every step.
  std::string logprobs_sha256;

  // The client's own cost: seconds spent parsing and recording, per event (median and max).
  double client_overhead_median_s = 0;
  double client_overhead_max_s = 0;
  // The load thread's whole CPU time for this request (CLOCK_THREAD_CPUTIME_ID over perform():
  // libcurl, the socket, parsing, recording), not only the write callback's share.
  double client_thread_cpu_s = 0;
  // Delivery: the output events (those carrying a token or text) each socket read (libcurl write
  // callback) of the stream completed, in order; 0 for a read that completed none (the role chunk,
  // the usage chunk and [DONE], a read that ended inside an event). One output event per read is a
  // stream whose tokens left the server as they were made; many in one read is bursty delivery,
  // and then the client's event times say nothing about the server's pace.
  std::vector<int32_t> events_per_read;
};

nlohmann::json to_json(const RequestRecord& record);
// Throws Error naming the bad field. client_thread_cpu_s, events_per_read and tool_calls are
// optional (records of bundles written before they existed lack them: 0 and empty; to_json writes
// tool_calls only when there is one).
RequestRecord record_from_json(const nlohmann::json& j);

}  // namespace sparkglm::harness
