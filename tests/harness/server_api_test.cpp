// The small API calls: Prometheus text parsing (offline), then health, tokenize, metrics and the
// model id against a real tinyglm-micro server.
#include "harness/server_api.h"

#include <cmath>

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "local_endpoints.h"

namespace sparkglm::harness {
namespace {

TEST(ServerApi, ParsesPrometheusText) {
  const std::string text =
      "# HELP sparkglm_x a counter\n"
      "# TYPE sparkglm_x counter\n"
      "sparkglm_x 3\n"
      "sparkglm_y{route=\"/v1/completions\",status=\"200\"} 12 1700000000000\n"
      "sparkglm_h_bucket{le=\"+Inf\"} 7\r\n"
      "\n"
      "sparkglm_z{label=\"has space\"} +Inf\n"
      "sparkglm_w 2.5e-3\n";
  const std::map<std::string, double> m = parse_prometheus_text(text);
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m.at("sparkglm_x"), 3);
  EXPECT_EQ(m.at("sparkglm_y{route=\"/v1/completions\",status=\"200\"}"), 12);
  EXPECT_EQ(m.at("sparkglm_h_bucket{le=\"+Inf\"}"), 7);
  EXPECT_TRUE(std::isinf(m.at("sparkglm_z{label=\"has space\"}")));
  EXPECT_DOUBLE_EQ(m.at("sparkglm_w"), 0.0025);
}

TEST(ServerApi, MalformedMetricsLineIsNamed) {
  for (const std::string bad : {"sparkglm_x\n", "sparkglm_x twelve\n", "sparkglm_y{a=\"b\" 1\n"}) {
    try {
      parse_prometheus_text("# fine\n" + bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
    }
  }
}

TEST(ServerApi, TalksToARealServer) {
  auto server = testing::start_tiny_server();
  const std::string url = server->base_url();
  EXPECT_TRUE(wait_healthy(url, 10));
  EXPECT_EQ(model_id(url), "tinyglm-micro");
  // tinyglm-micro's tokenizer is byte-level: six more bytes are six more tokens.
  const int32_t hello = count_tokens(url, "hello");
  EXPECT_EQ(size_t(hello), tokenize(url, {{"prompt", "hello"}}).size());
  EXPECT_EQ(count_tokens(url, "hello world"), hello + 6);
  const nlohmann::json messages = nlohmann::json::array({{{"role", "user"}, {"content", "hi"}}});
  EXPECT_GT(count_chat_tokens(url, messages), 2);
  const std::map<std::string, double> metrics = scrape_metrics(url);
  EXPECT_EQ(metrics.count("sparkglm_num_requests_running"), 1u);
  // A failed call says what came back.
  try {
    post_json(url, "/tokenize", {{"prompt", 5}});
    ADD_FAILURE() << "a bad /tokenize body was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("HTTP 400"), std::string::npos) << e.what();
  }
}

TEST(ServerApi, WaitHealthyGivesUpOnARefusedPort) {
  testing::LoopbackSocket closed;
  EXPECT_FALSE(wait_healthy(closed.base_url(), 0.2));
  const HttpResult r = http_get(closed.base_url() + "/health", 5);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.describe().rfind("connection failed", 0), 0u) << r.describe();
}

}  // namespace
}  // namespace sparkglm::harness
