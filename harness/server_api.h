#pragma once
// Small blocking calls to a server's HTTP API (libcurl): health, tokenization for exact prompt
// sizes, the Prometheus metrics text, the model id. Streaming requests are sse_client's.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <curl/curl.h>
#include <nlohmann/json.hpp>

namespace sparkglm::harness {

// curl_global_init once per process (thread-safe); call before creating any easy handle.
void curl_init_once();

// An easy handle that is always cleaned up; every option the harness shares is set here
// (no signals, so it is safe in threads; no proxy, since the harness talks to the server directly).
class CurlEasy {
 public:
  CurlEasy();
  ~CurlEasy();
  CurlEasy(const CurlEasy&) = delete;
  CurlEasy& operator=(const CurlEasy&) = delete;
  CURL* get() const { return handle_; }

 private:
  CURL* handle_;
};

struct HttpResult {
  int32_t status = 0;  // 0 when no response came
  std::string body;
  std::vector<std::string> headers;  // the response's header lines, "Name: value", as sent
  std::string transport_error;       // "" when a response came; otherwise libcurl's reason
  bool ok() const { return transport_error.empty() && status == 200; }
  std::string describe() const;  // "HTTP 400: {...}" or "connection failed: ..." for messages
};

// The bearer token every later request to `base_url` (and the paths under it) presents, as
// "Authorization: Bearer KEY"; for a server measured through --url that requires one. The key
// lives in this process only: nothing the harness records holds it.
void set_api_key(const std::string& base_url, const std::string& key);
// Appends the Authorization header for `url` when a key was set for its server; returns the list.
curl_slist* add_authorization(curl_slist* headers, const std::string& url);

HttpResult http_get(const std::string& url, double timeout_s = 30);
HttpResult http_post_json(const std::string& url, const nlohmann::json& body,
                          double timeout_s = 30);

// The parsed JSON body of a 200 response; throws Error(kIo) naming the URL and what came back.
nlohmann::json get_json(const std::string& base_url, const std::string& path,
                        double timeout_s = 30);
nlohmann::json post_json(const std::string& base_url, const std::string& path,
                         const nlohmann::json& body, double timeout_s = 30);

// Polls GET /health until it answers 200 (true) or timeout_s passes (false).
bool wait_healthy(const std::string& base_url, double timeout_s);

// POST /tokenize with the given body ({"prompt": ...} or {"messages": ..., ...}); the token ids.
std::vector<int32_t> tokenize(const std::string& base_url, const nlohmann::json& body);
// The token count of a completion prompt, and of a chat prompt as the server renders it
// (`extra` holds the request's other template fields, e.g. chat_template_kwargs).
int32_t count_tokens(const std::string& base_url, const std::string& prompt);
int32_t count_chat_tokens(const std::string& base_url, const nlohmann::json& messages,
                          const nlohmann::json& extra = nlohmann::json::object());

// Prometheus text exposition: each sample line `name{labels} value` becomes key "name{labels}"
// (labels exactly as written, "name" alone when there are none) -> value. Comments, blank lines
// and timestamps are skipped; a malformed sample line throws Error(kIo) naming the line.
std::map<std::string, double> parse_prometheus_text(const std::string& text);
std::map<std::string, double> scrape_metrics(const std::string& base_url);

// The id of the first model GET /v1/models lists.
std::string model_id(const std::string& base_url);

}  // namespace sparkglm::harness
