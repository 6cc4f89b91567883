#pragma once
// What a route sees of HTTP: a parsed request, and the exchange that answers it, either once
// (respond) or as a chunked stream (begin_stream, write..., end_stream). Beast stays inside the
// server and its connections (http_server.cpp, http_connection.cpp, connection*.{h,cpp}) so that
// routes and their tests compile without it.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace sparkglm::server {

class ApiError;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query string
  std::string body;
  std::string authorization;  // the Authorization header, or ""
  std::string peer;           // "127.0.0.1:54321", for logs
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra fields

  static HttpResponse json(int status, const nlohmann::json& body);
  static HttpResponse text(int status, std::string content_type, std::string body);
  static HttpResponse error(const ApiError& e);
};

// One request's answer in progress. Any thread may call its methods: write() sends from the calling
// thread (without blocking: what the socket does not take waits on the strand), the others run on
// the connection's strand, at once when called there and posted in call order otherwise. Once the
// exchange has ended or the client has gone, further calls do nothing.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;

  // Runs `fn` on the connection's strand; never blocks and never runs `fn` inline.
  virtual void post(std::function<void()> fn) = 0;
  // Runs `fn` on the strand at `when` (also after the client has gone).
  virtual void post_at(std::chrono::steady_clock::time_point when, std::function<void()> fn) = 0;
  virtual void respond(HttpResponse response) = 0;  // a whole answer; ends the exchange
  virtual void begin_stream(int status, const std::string& content_type) = 0;
  virtual void write(std::string bytes) = 0;  // one chunk of a stream's body, sent now
  virtual void end_stream() = 0;              // ends the exchange
  // `fn` runs once, on the strand, when the client disconnects (or stops reading) before the
  // exchange ends; it is dropped when the exchange ends normally.
  virtual void on_abandon(std::function<void()> fn) = 0;
  virtual bool open() const = 0;  // neither ended nor abandoned
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Called on the connection's strand for each complete request. May answer at once or keep the
  // exchange and answer later; an exception becomes an error response.
  virtual void handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) = 0;
  // The server has stopped its I/O threads (HttpServer::stop): from the return on, the handler
  // touches no exchange, so the server may go. A handler with threads of its own joins them.
  virtual void stop() {}
};

// The reason phrase of a status ("Not Found").
const char* status_reason(int status);

}  // namespace sparkglm::server
