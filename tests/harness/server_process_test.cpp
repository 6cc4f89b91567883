// ServerProcess: a healthy server on a port of its own, stopped cleanly by SIGTERM; a server that
// cannot start is an error carrying its log.
#include "harness/server_process.h"

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "harness/server_api.h"
#include "local_endpoints.h"

namespace sparkglm::harness {
namespace {

TEST(ServerProcess, StartsHealthyAndStopsCleanly) {
  auto server = testing::start_tiny_server();
  EXPECT_GT(server->port(), 0);
  EXPECT_EQ(server->base_url(), "http://127.0.0.1:" + std::to_string(server->port()));
  EXPECT_TRUE(server->running());
  EXPECT_TRUE(http_get(server->base_url() + "/health").ok());
  EXPECT_NE(server->log_tail().find("listening on"), std::string::npos);
  const ServerExit e = server->stop();
  EXPECT_TRUE(e.clean()) << e.describe() << "\n" << server->log_tail();
  EXPECT_EQ(e.describe(), "exit 0");
  EXPECT_FALSE(server->running());
  EXPECT_EQ(server->stop().describe(), "exit 0");  // idempotent
  EXPECT_FALSE(http_get(server->base_url() + "/health", 2).ok());
}

TEST(ServerProcess, TwoServersGetTwoPorts) {
  auto a = testing::start_tiny_server();
  auto b = testing::start_tiny_server();
  EXPECT_NE(a->port(), b->port());
}

TEST(ServerProcess, ServerThatExitsAtStartIsAnErrorWithItsLog) {
  try {
    testing::start_tiny_server({"--no-such-flag", "1"});
    FAIL() << "a server with an unknown flag started";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("exited before it was healthy"), std::string::npos) << what;
    EXPECT_NE(what.find("no-such-flag"), std::string::npos) << what;  // from the log's tail
  }
}

TEST(ServerProcess, MissingBinaryIsAnError) {
  ServerProcessOptions o;
  o.binary = "/nonexistent/sparkglm-serve";
  o.log_path = testing::temp_log("missing");
  EXPECT_THROW(ServerProcess{o}, Error);
}

}  // namespace
}  // namespace sparkglm::harness
