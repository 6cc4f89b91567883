#include "operator/http_get.h"

#include <curl/curl.h>

#include <memory>
#include <mutex>

#include "engine/core/build_info.h"
#include "engine/core/error.h"

namespace sparkglm::operator_tool {

namespace {

struct Sink {
  std::string* body;
  size_t max_bytes;
  bool over_limit = false;
};

size_t on_data(char* data, size_t size, size_t count, void* user) {
  Sink& sink = *static_cast<Sink*>(user);
  const size_t n = size * count;
  if (sink.body->size() + n > sink.max_bytes) {
    sink.over_limit = true;
    return 0;  // makes curl stop with CURLE_WRITE_ERROR
  }
  sink.body->append(data, n);
  return n;
}

std::string size_text(size_t bytes) {
  return bytes % (1 << 20) == 0 ? std::to_string(bytes >> 20) + " MiB"
                                : std::to_string(bytes) + " bytes";
}

}  // namespace

bool is_http_url(const std::string& text) {
  std::string head = text.substr(0, 8);
  for (char& c : head) c = char(std::tolower(static_cast<unsigned char>(c)));
  return head.rfind("http://", 0) == 0 || head.rfind("https://", 0) == 0;
}

HttpResult http_get(const std::string& url, const HttpLimits& limits, const std::string& bearer) {
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  const std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) throw Error(ErrorKind::kIo, url + ": cannot start an HTTP client");
  HttpResult result;
  Sink sink{&result.body, limits.max_bytes};
  char error_text[CURL_ERROR_SIZE] = {0};
  const std::string agent = std::string("sparkglm/") + build_info().version;
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  // A key goes to the URL asked for and nowhere a redirect points.
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, bearer.empty() ? 1L : 0L);
  const std::string authorization = "Authorization: Bearer " + bearer;
  const std::unique_ptr<curl_slist, void (*)(curl_slist*)> headers(
      bearer.empty() ? nullptr : curl_slist_append(nullptr, authorization.c_str()),
      curl_slist_free_all);
  if (headers) curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, limits.max_redirects);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, long(limits.timeout_s * 1000.0));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, long(std::min(limits.timeout_s, 10.0) * 1000.0));
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(limits.max_bytes));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, agent.c_str());
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");  // any encoding curl can decode
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_text);
  const CURLcode rc = curl_easy_perform(c);
  if (sink.over_limit || rc == CURLE_FILESIZE_EXCEEDED)
    throw Error(ErrorKind::kIo,
                url + ": the response is larger than the limit of " + size_text(limits.max_bytes));
  if (rc != CURLE_OK)
    throw Error(ErrorKind::kIo, url + ": " + (error_text[0] ? error_text : curl_easy_strerror(rc)));
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &result.status);
  const char* type = nullptr;
  if (curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &type) == CURLE_OK && type)
    result.content_type = type;
  const char* final_url = nullptr;
  if (curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &final_url) == CURLE_OK && final_url)
    result.final_url = final_url;
  return result;
}

}  // namespace sparkglm::operator_tool
