#include "engine/server/api_error.h"

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "engine/server/http_exchange.h"

namespace sparkglm::server {
namespace {

using nlohmann::json;

void expect_shape(const ApiError& e, int status, const std::string& type, const std::string& code) {
  EXPECT_EQ(e.status(), status);
  const json j = json::parse(e.body());
  ASSERT_TRUE(j.contains("error")) << e.body();
  const json& err = j["error"];
  EXPECT_EQ(err["type"], type);
  EXPECT_EQ(err["code"], code);
  EXPECT_TRUE(err["message"].is_string());
  EXPECT_FALSE(err["message"].get<std::string>().empty());
  EXPECT_TRUE(err.contains("param"));
}

TEST(ApiError, OpenAiShapeAndStatus) {
  expect_shape(ApiError::invalid_json("x"), 400, "invalid_request_error", "invalid_json");
  expect_shape(ApiError::wrong_type("temperature", "a number"), 400, "invalid_request_error",
               "invalid_type");
  expect_shape(ApiError::model_not_found("m"), 404, "invalid_request_error", "model_not_found");
  expect_shape(ApiError::prompt_too_long(3000, 2048, "prompt"), 400, "invalid_request_error",
               "context_length_exceeded");
  expect_shape(ApiError::route_not_found("GET", "/x"), 404, "invalid_request_error", "not_found");
  expect_shape(ApiError::method_not_allowed("GET", "/v1/completions", "POST"), 405,
               "invalid_request_error", "method_not_allowed");
  expect_shape(ApiError::body_too_large(1024), 413, "invalid_request_error", "request_too_large");
  expect_shape(ApiError::too_many_connections(8), 503, "server_error", "too_many_connections");
  expect_shape(ApiError::unauthorized(), 401, "invalid_request_error", "invalid_api_key");
  expect_shape(ApiError::shutting_down(), 503, "server_error", "shutting_down");
  expect_shape(ApiError::request_timeout("late"), 504, "timeout_error", "request_timeout");
  expect_shape(ApiError::internal("boom"), 500, "server_error", "internal_error");
}

TEST(ApiError, MessagesSayTheLimits) {
  EXPECT_NE(std::string(ApiError::prompt_too_long(3000, 2048, "prompt").what()).find("2048"),
            std::string::npos);
  EXPECT_NE(std::string(ApiError::body_too_large(1024).what()).find("1024"), std::string::npos);
  EXPECT_NE(std::string(ApiError::too_many_connections(8).what()).find("8"), std::string::npos);
  const json j = json::parse(ApiError::wrong_type("top_p", "a number").body());
  EXPECT_EQ(j["error"]["param"], "top_p");
}

TEST(ApiError, EngineErrorsMapToStatus) {
  const ApiError capacity =
      api_error_from(Error(ErrorKind::kCapacity, "needs 5000 tokens; the pool holds 4096"));
  EXPECT_EQ(capacity.status(), 400);
  EXPECT_NE(std::string(capacity.what()).find("4096"), std::string::npos);
  EXPECT_EQ(api_error_from(Error(ErrorKind::kInvalidArgument, "bad")).status(), 400);
  EXPECT_EQ(api_error_from(Error(ErrorKind::kIo, "disk")).status(), 500);
}

TEST(ApiError, BodyIsValidUtf8EvenForBinaryMessages) {
  const ApiError e = ApiError::model_not_found(std::string("bad\xff\xfe", 5));
  EXPECT_TRUE(json::accept(e.body()));
}

TEST(HttpResponse, ErrorCarriesStatusAndAuthHeader) {
  const HttpResponse r = HttpResponse::error(ApiError::unauthorized());
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.content_type, "application/json");
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "WWW-Authenticate");
  EXPECT_STREQ(status_reason(413), "Content Too Large");
  EXPECT_STREQ(status_reason(503), "Service Unavailable");
}

}  // namespace
}  // namespace sparkglm::server
