#include "harness/server_api.h"

#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"

namespace sparkglm::harness {

using nlohmann::json;

namespace {

size_t append_body(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

// One response header line as sent ("Server: x\r\n" -> "Server: x"); the status line and the
// blank end line are skipped.
size_t append_header(char* data, size_t size, size_t count, void* user) {
  std::string line(data, size * count);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (!line.empty() && line.rfind("HTTP/", 0) != 0)
    static_cast<std::vector<std::string>*>(user)->push_back(std::move(line));
  return size * count;
}

// Bearer tokens by server base URL (set_api_key); read by every request to that server.
std::mutex& keys_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, std::string>& api_keys() {
  static std::map<std::string, std::string> keys;
  return keys;
}

HttpResult perform(CurlEasy& curl, const std::string& url, double timeout_s,
                   curl_slist* headers = nullptr) {
  HttpResult result;
  char error[CURL_ERROR_SIZE] = {};
  CURL* h = curl.get();
  headers = add_authorization(headers, url);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, append_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &result.headers);
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, long(std::ceil(timeout_s * 1000)));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &result.body);
  const CURLcode code = curl_easy_perform(h);
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  result.status = int32_t(status);
  if (code != CURLE_OK)
    result.transport_error = std::string(curl_easy_strerror(code)) + (error[0] ? ": " : "") + error;
  curl_slist_free_all(headers);
  return result;
}

std::string strip_slash(const std::string& base_url) {
  std::string u = base_url;
  while (!u.empty() && u.back() == '/') u.pop_back();
  return u;
}

json parse_ok(const HttpResult& r, const std::string& url) {
  if (!r.ok()) throw Error(ErrorKind::kIo, url + ": " + r.describe());
  return parse_json(r.body, url + ": the response", ErrorKind::kIo, json_limits::kServerReply);
}

}  // namespace

void set_api_key(const std::string& base_url, const std::string& key) {
  std::lock_guard<std::mutex> lock(keys_mutex());
  api_keys()[strip_slash(base_url)] = key;
}

curl_slist* add_authorization(curl_slist* headers, const std::string& url) {
  std::lock_guard<std::mutex> lock(keys_mutex());
  for (const auto& [base, key] : api_keys())
    if (url.rfind(base, 0) == 0 && (url.size() == base.size() || url[base.size()] == '/'))
      return curl_slist_append(headers, ("Authorization: Bearer " + key).c_str());
  return headers;
}

void curl_init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
      throw Error(ErrorKind::kIo, "libcurl could not be initialised (curl_global_init)");
  });
}

CurlEasy::CurlEasy() {
  curl_init_once();
  handle_ = curl_easy_init();
  if (!handle_) throw Error(ErrorKind::kIo, "libcurl could not create a handle (curl_easy_init)");
  curl_easy_setopt(handle_, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(handle_, CURLOPT_PROXY, "");
  curl_easy_setopt(handle_, CURLOPT_TCP_NODELAY, 1L);
}

CurlEasy::~CurlEasy() {
  curl_easy_cleanup(handle_);
}

std::string HttpResult::describe() const {
  if (!transport_error.empty()) return "connection failed: " + transport_error;
  return "HTTP " + std::to_string(status) + (body.empty() ? "" : ": " + body);
}

HttpResult http_get(const std::string& url, double timeout_s) {
  CurlEasy curl;
  return perform(curl, url, timeout_s);
}

HttpResult http_post_json(const std::string& url, const json& body, double timeout_s) {
  CurlEasy curl;
  const std::string bytes = body.dump();
  // Without an empty Expect, libcurl waits up to a second for "100 Continue" on larger bodies.
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Expect:");
  curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDS, bytes.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.size()));
  return perform(curl, url, timeout_s, headers);  // frees the headers
}

json get_json(const std::string& base_url, const std::string& path, double timeout_s) {
  const std::string url = strip_slash(base_url) + path;
  return parse_ok(http_get(url, timeout_s), "GET " + url);
}

json post_json(const std::string& base_url, const std::string& path, const json& body,
               double timeout_s) {
  const std::string url = strip_slash(base_url) + path;
  return parse_ok(http_post_json(url, body, timeout_s), "POST " + url);
}

bool wait_healthy(const std::string& base_url, double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  const std::string url = strip_slash(base_url) + "/health";
  while (true) {
    if (http_get(url, 2).ok()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::vector<int32_t> tokenize(const std::string& base_url, const json& body) {
  const json r = post_json(base_url, "/tokenize", body);
  if (!r.contains("tokens") || !r["tokens"].is_array())
    throw Error(ErrorKind::kIo, "POST /tokenize: the response has no `tokens` array: " + r.dump());
  return r["tokens"].get<std::vector<int32_t>>();
}

int32_t count_tokens(const std::string& base_url, const std::string& prompt) {
  return int32_t(tokenize(base_url, {{"prompt", prompt}}).size());
}

int32_t count_chat_tokens(const std::string& base_url, const json& messages, const json& extra) {
  json body = extra.is_object() ? extra : json::object();
  body["messages"] = messages;
  return int32_t(tokenize(base_url, body).size());
}

std::map<std::string, double> parse_prometheus_text(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    // The key runs to the closing brace when there are labels (label values may hold spaces).
    size_t key_end = line.find_first_of(" \t{", first);
    if (key_end != std::string::npos && line[key_end] == '{') {
      const size_t close = line.find('}', key_end);
      key_end = close == std::string::npos ? std::string::npos : close + 1;
    }
    const auto bad = [&](const char* why) {
      throw Error(ErrorKind::kIo,
                  "metrics text line " + std::to_string(line_no) + " (" + line + "): " + why);
    };
    if (key_end == std::string::npos || key_end >= line.size()) bad("expected `name value`");
    std::istringstream rest(line.substr(key_end));
    std::string value_text;
    rest >> value_text;  // a timestamp may follow; it is not kept
    double value = 0;
    if (value_text == "+Inf") {
      value = INFINITY;
    } else if (value_text == "-Inf") {
      value = -INFINITY;
    } else if (value_text == "NaN") {
      value = NAN;
    } else {
      size_t used = 0;
      try {
        value = std::stod(value_text, &used);
      } catch (const std::exception&) {
        bad("the value is not a number");
      }
      if (used != value_text.size()) bad("the value is not a number");
    }
    samples[line.substr(first, key_end - first)] = value;
  }
  return samples;
}

std::map<std::string, double> scrape_metrics(const std::string& base_url) {
  const std::string url = strip_slash(base_url) + "/metrics";
  const HttpResult r = http_get(url);
  if (!r.ok()) throw Error(ErrorKind::kIo, "GET " + url + ": " + r.describe());
  return parse_prometheus_text(r.body);
}

std::string model_id(const std::string& base_url) {
  const json r = get_json(base_url, "/v1/models");
  if (!r.contains("data") || !r["data"].is_array() || r["data"].empty() ||
      !r["data"][0].contains("id") || !r["data"][0]["id"].is_string())
    throw Error(ErrorKind::kIo, "GET /v1/models: expected data[0].id, got " + r.dump());
  return r["data"][0]["id"].get<std::string>();
}

}  // namespace sparkglm::harness
