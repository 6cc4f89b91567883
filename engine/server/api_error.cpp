#include "engine/server/api_error.h"

#include <utility>

namespace sparkglm::server {

ApiError::ApiError(int status, std::string type, std::string code, const std::string& message,
                   std::string param)
    : std::runtime_error(message),
      status_(status),
      type_(std::move(type)),
      code_(std::move(code)),
      param_(std::move(param)) {}

nlohmann::json ApiError::to_json() const {
  nlohmann::json e = {{"message", what()}, {"type", type_}, {"code", code_}};
  e["param"] = param_.empty() ? nlohmann::json(nullptr) : nlohmann::json(param_);
  return {{"error", std::move(e)}};
}

std::string ApiError::body() const {
  // A message may quote request bytes that are not UTF-8; replace them rather than throw.
  return to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError ApiError::invalid_request(const std::string& message, const std::string& param) {
  return ApiError(400, "invalid_request_error", "invalid_request", message, param);
}

ApiError ApiError::invalid_json(const std::string& detail) {
  return ApiError(400, "invalid_request_error", "invalid_json",
                  "the request body is not valid JSON: " + detail);
}

ApiError ApiError::wrong_type(const std::string& field, const std::string& expected) {
  return ApiError(400, "invalid_request_error", "invalid_type",
                  "`" + field + "` must be " + expected, field);
}

ApiError ApiError::model_not_found(const std::string& model) {
  return ApiError(404, "invalid_request_error", "model_not_found",
                  "the model `" + model + "` does not exist (see GET /v1/models)", "model");
}

ApiError ApiError::prompt_too_long(int prompt_tokens, int limit, const std::string& param) {
  return ApiError(400, "invalid_request_error", "context_length_exceeded",
                  "the prompt has " + std::to_string(prompt_tokens) +
                      " tokens; this server's limit (--max-seq-len) is " + std::to_string(limit) +
                      " tokens for prompt and output together",
                  param);
}

ApiError ApiError::route_not_found(const std::string& method, const std::string& path) {
  return ApiError(404, "invalid_request_error", "not_found", "no route for " + method + " " + path);
}

ApiError ApiError::method_not_allowed(const std::string& method, const std::string& path,
                                      const std::string& allowed) {
  return ApiError(405, "invalid_request_error", "method_not_allowed",
                  path + " does not accept " + method + " (allowed: " + allowed + ")");
}

ApiError ApiError::body_too_large(size_t limit) {
  return ApiError(413, "invalid_request_error", "request_too_large",
                  "the request body is larger than this server's limit of " +
                      std::to_string(limit) + " bytes (--max-body-bytes)");
}

ApiError ApiError::unsupported_content_encoding(const std::string& coding) {
  return ApiError(415, "invalid_request_error", "unsupported_content_encoding",
                  "the request body has Content-Encoding \"" + coding +
                      "\", which this server does not decode: send the body unencoded");
}

ApiError ApiError::too_many_connections(int limit) {
  return ApiError(503, "server_error", "too_many_connections",
                  "the server already has its maximum of " + std::to_string(limit) +
                      " open connections (--max-connections); retry later");
}

ApiError ApiError::unauthorized() {
  return ApiError(401, "invalid_request_error", "invalid_api_key",
                  "missing or wrong API key: send `Authorization: Bearer <key>`");
}

ApiError ApiError::shutting_down() {
  return ApiError(503, "server_error", "shutting_down", "the server is shutting down");
}

ApiError ApiError::request_timeout(const std::string& message) {
  return ApiError(504, "timeout_error", "request_timeout", message);
}

ApiError ApiError::internal(const std::string& message) {
  return ApiError(500, "server_error", "internal_error", message);
}

ApiError ApiError::device_fault(const std::string& reason) {
  return ApiError(503, "server_error", "device_fault",
                  "the engine stopped on a device fault and the server is restarting: " + reason);
}

ApiError api_error_from(const Error& e) {
  switch (e.kind()) {
    case ErrorKind::kCapacity:
      return ApiError(400, "invalid_request_error", "request_too_large_for_server",
                      "this request can never fit in this server: " + e.message());
    case ErrorKind::kInvalidArgument:
      return ApiError::invalid_request(e.message());
    case ErrorKind::kDeviceFatal:
      return ApiError::device_fault(e.message());
    default:
      return ApiError::internal(e.what());
  }
}

}  // namespace sparkglm::server
