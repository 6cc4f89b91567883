#include "harness/request_record.h"

#include <set>
#include <string>
#include <string_view>

#include "engine/core/error.h"

namespace sparkglm::harness {

using nlohmann::json;

namespace {

// The record's keys, in the order to_json writes them; record_from_json requires each but the
// newer ones that older bundles lack (logprobs_sha256, client_thread_cpu_s, events_per_read,
// tool_calls), and
// accepts no other.
const std::set<std::string>& record_keys() {
  static const std::set<std::string> keys = {"arm",
                                             "workload",
                                             "case_id",
                                             "repetition",
                                             "index",
                                             "marker",
                                             "start_s",
                                             "first_output_s",
                                             "first_visible_s",
                                             "output_event_s",
                                             "end_s",
                                             "ok",
                                             "http_status",
                                             "error",
                                             "finish_reason",
                                             "prompt_tokens",
                                             "completion_tokens",
                                             "cached_tokens",
                                             "reasoning_tokens",
                                             "token_ids",
                                             "output_text",
                                             "reasoning_text",
                                             "output_sha256",
                                             "reasoning_sha256",
                                             "token_ids_sha256",
                                             "logprobs_sha256",
                                             "client_overhead_median_s",
                                             "client_overhead_max_s",
                                             "client_thread_cpu_s",
                                             "events_per_read",
                                             "tool_calls"};
  return keys;
}

[[noreturn]] void bad_field(const std::string& key, const char* expected) {
  throw Error(ErrorKind::kInvalidArgument,
              "request record field `" + key + "`: expected " + expected);
}

// The key by value: a `const std::string&` bound to a literal makes g++ 13 warn that the returned
// reference may dangle (-Wdangling-reference), though it refers into `j`.
const json& field(const json& j, std::string_view key) {
  auto it = j.find(std::string(key));
  if (it == j.end()) bad_field(std::string(key), "present (the record lacks it)");
  return *it;
}

std::string text(const json& j, const std::string& key) {
  const json& v = field(j, key);
  if (!v.is_string()) bad_field(key, "a string");
  return v.get<std::string>();
}

double seconds(const json& j, const std::string& key) {
  const json& v = field(j, key);
  if (!v.is_number()) bad_field(key, "a number of seconds");
  return v.get<double>();
}

std::optional<double> optional_seconds(const json& j, const std::string& key) {
  const json& v = field(j, key);
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) bad_field(key, "a number of seconds or null");
  return v.get<double>();
}

int32_t int32(const json& j, const std::string& key) {
  const json& v = field(j, key);
  if (!v.is_number_integer()) bad_field(key, "an integer");
  // An unsigned value above INT64_MAX would read back as a negative int64_t: 2^64 - 1 as -1.
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT32_MAX))
    bad_field(key, "a 32-bit integer");
  const int64_t x = v.get<int64_t>();
  if (x < INT32_MIN || x > INT32_MAX) bad_field(key, "a 32-bit integer");
  return int32_t(x);
}

// A token count or an HTTP status: never negative.
int32_t count(const json& j, const std::string& key) {
  const int32_t x = int32(j, key);
  if (x < 0) bad_field(key, "a non-negative 32-bit integer");
  return x;
}

json optional_json(const std::optional<double>& v) {
  return v ? json(*v) : json(nullptr);
}

}  // namespace

json to_json(const RequestRecord& r) {
  json j = {{"arm", r.arm},
            {"workload", r.workload},
            {"case_id", r.case_id},
            {"repetition", r.repetition},
            {"index", r.index},
            {"marker", r.marker},
            {"start_s", r.start_s},
            {"first_output_s", optional_json(r.first_output_s)},
            {"first_visible_s", optional_json(r.first_visible_s)},
            {"output_event_s", r.output_event_s},
            {"end_s", r.end_s},
            {"ok", r.ok},
            {"http_status", r.http_status},
            {"error", r.error},
            {"finish_reason", r.finish_reason},
            {"prompt_tokens", r.prompt_tokens},
            {"completion_tokens", r.completion_tokens},
            {"cached_tokens", r.cached_tokens},
            {"reasoning_tokens", r.reasoning_tokens},
            {"token_ids", r.token_ids},
            {"output_text", r.output_text},
            {"reasoning_text", r.reasoning_text},
            {"output_sha256", r.output_sha256},
            {"reasoning_sha256", r.reasoning_sha256},
            {"token_ids_sha256", r.token_ids_sha256},
            {"logprobs_sha256", r.logprobs_sha256},
            {"client_overhead_median_s", r.client_overhead_median_s},
            {"client_overhead_max_s", r.client_overhead_max_s},
            {"client_thread_cpu_s", r.client_thread_cpu_s},
            {"events_per_read", r.events_per_read}};
  if (!r.tool_calls.empty()) {
    json& calls = j["tool_calls"] = json::array();
    for (const ToolCallRecord& c : r.tool_calls)
      calls.push_back({{"name", c.name}, {"arguments", c.arguments}});
  }
  return j;
}

RequestRecord record_from_json(const json& j) {
  if (!j.is_object())
    throw Error(ErrorKind::kInvalidArgument, "request record: expected a JSON object");
  for (const auto& [key, value] : j.items())
    if (!record_keys().count(key))
      throw Error(ErrorKind::kInvalidArgument,
                  "request record field `" + key + "`: not a RequestRecord field");
  RequestRecord r;
  r.arm = text(j, "arm");
  r.workload = text(j, "workload");
  r.case_id = text(j, "case_id");
  r.repetition = int32(j, "repetition");
  r.index = int32(j, "index");
  r.marker = text(j, "marker");
  r.start_s = seconds(j, "start_s");
  r.first_output_s = optional_seconds(j, "first_output_s");
  r.first_visible_s = optional_seconds(j, "first_visible_s");
  const json& events = field(j, "output_event_s");
  if (!events.is_array()) bad_field("output_event_s", "an array of seconds");
  for (const json& t : events) {
    if (!t.is_number()) bad_field("output_event_s", "an array of seconds");
    r.output_event_s.push_back(t.get<double>());
  }
  r.end_s = seconds(j, "end_s");
  const json& ok = field(j, "ok");
  if (!ok.is_boolean()) bad_field("ok", "true or false");
  r.ok = ok.get<bool>();
  r.http_status = count(j, "http_status");
  r.error = text(j, "error");
  r.finish_reason = text(j, "finish_reason");
  r.prompt_tokens = count(j, "prompt_tokens");
  r.completion_tokens = count(j, "completion_tokens");
  r.cached_tokens = count(j, "cached_tokens");
  r.reasoning_tokens = count(j, "reasoning_tokens");
  const json& ids = field(j, "token_ids");
  if (!ids.is_array()) bad_field("token_ids", "an array of token ids");
  for (const json& id : ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      bad_field("token_ids", "an array of non-negative 32-bit token ids");
    r.token_ids.push_back(id.get<int32_t>());
  }
  r.output_text = text(j, "output_text");
  r.reasoning_text = text(j, "reasoning_text");
  r.output_sha256 = text(j, "output_sha256");
  r.reasoning_sha256 = text(j, "reasoning_sha256");
  r.token_ids_sha256 = text(j, "token_ids_sha256");
  if (j.contains("logprobs_sha256")) r.logprobs_sha256 = text(j, "logprobs_sha256");  // 2026-12
  r.client_overhead_median_s = seconds(j, "client_overhead_median_s");
  r.client_overhead_max_s = seconds(j, "client_overhead_max_s");
  if (j.contains("client_thread_cpu_s")) r.client_thread_cpu_s = seconds(j, "client_thread_cpu_s");
  if (j.contains("events_per_read")) {
    const json& reads = j["events_per_read"];
    if (!reads.is_array()) bad_field("events_per_read", "an array of event counts");
    for (const json& n : reads) {
      if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() > INT32_MAX)
        bad_field("events_per_read", "an array of non-negative event counts");
      r.events_per_read.push_back(n.get<int32_t>());
    }
  }
  if (j.contains("tool_calls")) {
    const json& calls = j["tool_calls"];
    if (!calls.is_array()) bad_field("tool_calls", "an array of {name, arguments}");
    for (const json& c : calls) {
      if (!c.is_object() || c.size() != 2 || !c.contains("name") || !c["name"].is_string() ||
          !c.contains("arguments") || !c["arguments"].is_string())
        bad_field("tool_calls", "an array of {\"name\": text, \"arguments\": text}");
      r.tool_calls.push_back({c["name"].get<std::string>(), c["arguments"].get<std::string>()});
    }
  }
  return r;
}

}  // namespace sparkglm::harness
