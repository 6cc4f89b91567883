#include "harness/sse_client.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/core/strict_json.h"
#include "engine/text/utf8_stream.h"
#include "harness/server_api.h"
#include "harness/sse_parser.h"
#include "harness/statistics.h"

namespace sparkglm::harness {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// An error body longer than this is cut: the record keeps what went wrong, not a page of HTML.
constexpr size_t kMaxErrorBody = 4096;
// The most tool calls one request records: the server returns at most 64 a choice.
constexpr size_t kMaxToolCalls = 64;

// The state of one transfer, shared with libcurl's write callback.
struct Transfer {
  CURL* curl = nullptr;
  Clock::time_point epoch;
  RequestRecord* record = nullptr;
  SseParser parser;
  std::vector<std::string> events;  // reused between callbacks
  std::vector<double> overhead_s;   // one per output event: the time of the callback holding it
  std::string error_body;           // the body of a response that is not 200
  std::string stream_error;         // the first error found in the stream
  std::string logprobs;             // every chunk's non-null `logprobs`, dumped and joined
  bool status_checked = false;
  bool failed_status = false;
  bool done = false;  // [DONE] seen
  bool usage_seen = false;

  double since_epoch(Clock::time_point t) const {
    return std::chrono::duration<double>(t - epoch).count();
  }
  void fail(std::string why) {
    if (stream_error.empty()) stream_error = std::move(why);
  }
  void on_event(const std::string& data, double t);
  void on_chunk(const json& chunk, double t);
};

void Transfer::on_event(const std::string& data, double t) {
  if (done) return fail("an event arrived after [DONE]: " + data.substr(0, 200));
  if (data == "[DONE]") {
    done = true;
    record->end_s = t;
    return;
  }
  json chunk;
  try {
    chunk = parse_json(data, "SSE event", ErrorKind::kIo, json_limits::kServerReply);
  } catch (const Error& e) {
    return fail("malformed SSE event (" + e.message().substr(0, 200) + "): " + data.substr(0, 200));
  }
  if (!chunk.is_object())
    return fail("malformed SSE event (not an object): " + data.substr(0, 200));
  if (chunk.contains("error")) return fail("error event: " + chunk["error"].dump());
  on_chunk(chunk, t);
}

// A usage count or a token id as the server sent it, when it is an integer in [0, 2^31 - 1].
// Anything else (-5, 1e20, 2^64 - 1) fails the request: converted, it would be recorded as an
// observation, and 1e20 into an int is undefined.
std::optional<int32_t> non_negative_int32(const json& v) {
  if (v.is_number_unsigned())  // read as uint64_t: 2^64 - 1 would be -1 as int64_t
    return v.get<uint64_t>() <= uint64_t(INT32_MAX) ? std::optional(int32_t(v.get<uint64_t>()))
                                                    : std::nullopt;
  if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX)
    return int32_t(v.get<int64_t>());
  return std::nullopt;
}

void Transfer::on_chunk(const json& chunk, double t) {
  RequestRecord& r = *record;
  if (auto u = chunk.find("usage"); u != chunk.end() && u->is_object()) {
    usage_seen = true;
    const auto count = [&](const json& obj, const char* key, int32_t& out) {
      const auto it = obj.find(key);
      const std::optional<int32_t> n = it == obj.end() ? 0 : non_negative_int32(*it);
      if (!n) fail(std::string("usage ") + key + " is not a count: " + it->dump().substr(0, 200));
      out = n.value_or(0);
    };
    count(*u, "prompt_tokens", r.prompt_tokens);
    count(*u, "completion_tokens", r.completion_tokens);
    if (auto d = u->find("prompt_tokens_details"); d != u->end() && d->is_object())
      count(*d, "cached_tokens", r.cached_tokens);
    if (auto d = u->find("completion_tokens_details"); d != u->end() && d->is_object())
      count(*d, "reasoning_tokens", r.reasoning_tokens);
  }
  auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array()) return fail("a chunk without `choices`");
  for (const json& c : *choices) {
    if (c.value("index", 0) != 0)
      return fail("a chunk for choice " + c["index"].dump() + " (n > 1)");
    std::string content, reasoning;
    if (auto d = c.find("delta"); d != c.end() && d->is_object()) {  // chat
      if (auto v = d->find("content"); v != d->end() && v->is_string()) content = *v;
      if (auto v = d->find("reasoning_content"); v != d->end() && v->is_string()) reasoning = *v;
      if (auto calls = d->find("tool_calls"); calls != d->end() && !calls->is_null()) {
        if (!calls->is_array()) return fail("a delta whose `tool_calls` is not an array");
        for (const json& call : *calls) {
          const auto fn = call.is_object() ? call.find("function") : call.end();
          if (fn == call.end() || !fn->is_object() || !fn->contains("name") ||
              !(*fn)["name"].is_string() || !fn->contains("arguments") ||
              !(*fn)["arguments"].is_string())
            return fail("a tool call without a function name and arguments: " +
                        call.dump().substr(0, 200));
          if (r.tool_calls.size() >= kMaxToolCalls)
            return fail("more than " + std::to_string(kMaxToolCalls) + " tool calls");
          r.tool_calls.push_back(
              {(*fn)["name"].get<std::string>(), (*fn)["arguments"].get<std::string>()});
        }
      }
    } else if (auto v = c.find("text"); v != c.end() && v->is_string()) {  // completion
      content = *v;
    }
    size_t tokens = 0;
    if (auto ids = c.find("token_ids"); ids != c.end() && ids->is_array()) {
      for (const json& id : *ids) {
        const std::optional<int32_t> n = non_negative_int32(id);
        if (!n) return fail("token id " + id.dump().substr(0, 200) + " is not a 32-bit token id");
        r.token_ids.push_back(*n);
      }
      tokens = ids->size();
    }
    if (auto f = c.find("finish_reason"); f != c.end() && f->is_string()) r.finish_reason = *f;
    if (auto l = c.find("logprobs"); l != c.end() && !l->is_null()) logprobs += l->dump() + "\n";
    // A token whose bytes do not yet complete a character carries no text but is output all the
    // same: the clock keys to the token (TTFT, decode window), visibility only to content.
    if (tokens == 0 && content.empty() && reasoning.empty()) continue;
    r.output_text += content;
    r.reasoning_text += reasoning;
    r.output_event_s.push_back(t);
    if (!r.first_output_s) r.first_output_s = t;
    if (!content.empty() && !r.first_visible_s) r.first_visible_s = t;
  }
}

// libcurl calls this once the connection is up, just before it sends the request.
int on_request_ready(void* user, char*, char*, int, int) {
  auto& x = *static_cast<Transfer*>(user);
  x.record->start_s = x.since_epoch(Clock::now());
  return CURL_PREREQFUNC_OK;
}

size_t on_bytes(char* data, size_t size, size_t count, void* user) {
  const Clock::time_point entered = Clock::now();
  auto& x = *static_cast<Transfer*>(user);
  const size_t n = size * count;
  if (!x.status_checked) {
    long status = 0;
    curl_easy_getinfo(x.curl, CURLINFO_RESPONSE_CODE, &status);
    x.record->http_status = int32_t(status);
    x.failed_status = status != 200;
    x.status_checked = true;
  }
  if (x.failed_status) {
    x.error_body.append(data,
                        std::min(n, kMaxErrorBody - std::min(kMaxErrorBody, x.error_body.size())));
    return n;
  }
  const double t = x.since_epoch(entered);
  const size_t outputs_before = x.record->output_event_s.size();
  x.events.clear();
  x.parser.feed(std::string_view(data, n), x.events);
  for (const std::string& e : x.events) {
    try {
      x.on_event(e, t);
    } catch (const std::exception& ex) {  // a field of an unexpected type; never into libcurl
      x.fail(std::string("malformed SSE event (") + ex.what() + "): " + e.substr(0, 200));
    }
  }
  const size_t outputs = x.record->output_event_s.size() - outputs_before;
  x.record->events_per_read.push_back(int32_t(outputs));
  if (outputs > 0) {
    const double spent = std::chrono::duration<double>(Clock::now() - entered).count();
    x.overhead_s.insert(x.overhead_s.end(), outputs, spent);
  }
  return n;
}

// This thread's CPU time: the load thread's whole cost, where the callback's clock sees only part.
double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

std::string strip_slash(const std::string& base_url) {
  std::string u = base_url;
  while (!u.empty() && u.back() == '/') u.pop_back();
  return u;
}

// The reason a finished transfer failed, or "" when it succeeded.
std::string failure(CURLcode code, const char* curl_error, const Transfer& x,
                    const RequestSpec& spec) {
  const std::string detail =
      std::string(curl_easy_strerror(code)) + (curl_error[0] ? std::string(": ") + curl_error : "");
  if (code == CURLE_OPERATION_TIMEDOUT)
    return "timeout: no complete response within " + std::to_string(spec.timeout_s) + " s (" +
           detail + ")";
  if (code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST)
    return "connection failed: " + detail;
  if (x.failed_status)
    return "HTTP " + std::to_string(x.record->http_status) +
           (x.error_body.empty() ? "" : ": " + x.error_body);
  if (code != CURLE_OK) return "transfer failed: " + detail;
  if (x.record->http_status != 200)
    return "HTTP " + std::to_string(x.record->http_status) + " with an empty body";
  if (!x.stream_error.empty()) return x.stream_error;
  if (!x.done) return "the stream ended without `data: [DONE]`";
  if (x.parser.pending()) return "the stream ended inside an event";
  if (x.record->finish_reason.empty()) return "the stream ended without a finish_reason";
  if (!x.usage_seen) return "the stream ended without the usage chunk";
  return "";
}

}  // namespace

json streaming_body(const json& body) {
  if (!body.is_object())
    throw Error(ErrorKind::kInvalidArgument,
                "request `body`: expected a JSON object, got " + body.dump().substr(0, 200));
  json b = body;
  b["stream"] = true;
  if (!b.contains("stream_options") || !b["stream_options"].is_object())
    b["stream_options"] = json::object();
  b["stream_options"]["include_usage"] = true;
  b["return_token_ids"] = true;
  return b;
}

// Everything a transfer needs, built before the clock starts: a barrier releases requests that
// are ready to go, so building a body or a handle does not stagger their starts.
struct SseRequest::State {
  RequestSpec spec;
  RequestRecord record;
  std::string body, url;
  std::string invalid;  // why the request cannot be sent ("" when it can)
  CurlEasy curl;
  curl_slist* headers = nullptr;
  char curl_error[CURL_ERROR_SIZE] = {};
  Transfer x;
  bool performed = false;

  ~State() { curl_slist_free_all(headers); }
};

SseRequest::SseRequest(const std::string& base_url, const RequestSpec& spec, const std::string& arm,
                       Clock::time_point epoch)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.spec = spec;
  RequestRecord& r = s.record;
  r.arm = arm;
  r.workload = spec.workload;
  r.case_id = spec.case_id;
  r.repetition = spec.repetition;
  r.index = spec.index;
  r.marker = spec.marker;
  s.x.curl = s.curl.get();
  s.x.epoch = epoch;
  s.x.record = &r;
  try {
    s.body = streaming_body(spec.body).dump();
  } catch (const std::exception& e) {
    s.invalid = std::string("invalid request: ") + e.what();
    return;
  }
  s.url = strip_slash(base_url) + spec.path;
  s.headers = curl_slist_append(s.headers, "Content-Type: application/json");
  s.headers = curl_slist_append(s.headers, "Accept: text/event-stream");
  s.headers = curl_slist_append(s.headers, "Expect:");  // no "100 Continue" round trip
  s.headers = add_authorization(s.headers, s.url);
  CURL* h = s.curl.get();
  curl_easy_setopt(h, CURLOPT_URL, s.url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, s.headers);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, s.body.c_str());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(s.body.size()));
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, s.curl_error);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, long(std::max(1.0, std::ceil(spec.timeout_s * 1000))));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_bytes);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &s.x);
  curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, on_request_ready);
  curl_easy_setopt(h, CURLOPT_PREREQDATA, &s.x);
}

SseRequest::~SseRequest() = default;

RequestRecord SseRequest::perform() {
  State& s = *state_;
  SPARKGLM_ASSERT(!s.performed, "an SseRequest is performed once");
  s.performed = true;
  RequestRecord& r = s.record;
  Transfer& x = s.x;
  const auto now = [&] { return std::chrono::duration<double>(Clock::now() - x.epoch).count(); };
  if (!s.invalid.empty()) {
    r.start_s = r.end_s = now();
    r.error = s.invalid;
    return std::move(r);
  }
  r.start_s = now();  // replaced by on_request_ready once connected
  const double cpu_before = thread_cpu_s();
  const CURLcode code = curl_easy_perform(s.curl.get());
  r.client_thread_cpu_s = thread_cpu_s() - cpu_before;
  const double finished = now();
  if (!x.status_checked) {
    long status = 0;
    curl_easy_getinfo(s.curl.get(), CURLINFO_RESPONSE_CODE, &status);
    r.http_status = int32_t(status);
  }

  r.error = valid_utf8(failure(code, s.curl_error, x, s.spec));  // may quote the server's bytes
  r.ok = r.error.empty();
  if (!r.ok || !x.done) r.end_s = finished;
  r.output_sha256 = sha256_hex(r.output_text);
  r.reasoning_sha256 = sha256_hex(r.reasoning_text);
  r.token_ids_sha256 = sha256_hex(ids_text(r.token_ids));
  if (!x.logprobs.empty()) r.logprobs_sha256 = sha256_hex(x.logprobs);
  if (!x.overhead_s.empty()) {
    r.client_overhead_median_s = median(x.overhead_s);
    r.client_overhead_max_s = *std::max_element(x.overhead_s.begin(), x.overhead_s.end());
  }
  return std::move(r);
}

RequestRecord stream_request(const std::string& base_url, const RequestSpec& spec,
                             const std::string& arm, Clock::time_point epoch) {
  return SseRequest(base_url, spec, arm, epoch).perform();
}

}  // namespace sparkglm::harness
