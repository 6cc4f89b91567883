#pragma once
// An error a client sees: an HTTP status and OpenAI's body shape
// {"error": {"message", "type", "param", "code"}}. Route code throws ApiError; the server turns it
// (and an engine Error) into the response.
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"

namespace sparkglm::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, std::string code, const std::string& message,
           std::string param = "");

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& code() const { return code_; }
  const std::string& param() const { return param_; }  // the request field at fault, or ""

  nlohmann::json to_json() const;  // {"error": {...}}
  std::string body() const;        // to_json() serialised

  // The common cases, each with OpenAI's type and a stable code.
  static ApiError invalid_request(const std::string& message, const std::string& param = "");
  static ApiError invalid_json(const std::string& detail);
  static ApiError wrong_type(const std::string& field, const std::string& expected);
  static ApiError model_not_found(const std::string& model);
  static ApiError prompt_too_long(int prompt_tokens, int limit, const std::string& param);
  static ApiError route_not_found(const std::string& method, const std::string& path);
  static ApiError method_not_allowed(const std::string& method, const std::string& path,
                                     const std::string& allowed);
  static ApiError body_too_large(size_t limit);
  // 415: the body has a content coding (`coding`, "gzip") this server does not decode.
  static ApiError unsupported_content_encoding(const std::string& coding);
  static ApiError too_many_connections(int limit);
  static ApiError unauthorized();
  static ApiError shutting_down();
  static ApiError request_timeout(const std::string& message);
  static ApiError internal(const std::string& message);
  // The engine stopped on a device fault (503: the server exits and its supervisor restarts it).
  static ApiError device_fault(const std::string& reason);

 private:
  int status_;
  std::string type_, code_, param_;
};

// An engine Error raised while serving a request: kInvalidArgument and kCapacity are the client's
// (400), kDeviceFatal is 503 (device_fault), everything else is the server's (500).
ApiError api_error_from(const Error& e);

}  // namespace sparkglm::server
