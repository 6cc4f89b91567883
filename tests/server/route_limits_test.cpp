// What a request may cost before it reaches the engine, and where that cost is paid: the limits
// on messages, tools and prompt bytes (a 400 naming each), the request workers that keep body
// reading, template rendering and tokenizing off the I/O thread (and their bounded queue: a 503 at
// once), and which routes the API key guards.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/server/api_error.h"
#include "engine/server/metrics.h"
#include "engine/server/openai_routes.h"

namespace sparkglm::server {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class CountingEngine : public GenerationEngine {
 public:
  std::shared_ptr<RequestHandle> submit(GenerationRequest request) override {
    std::lock_guard<std::mutex> lock(mutex);
    prompts.push_back(request.prompt);
    return std::make_shared<RequestHandle>(prompts.size());
  }
  EngineStats stats() const override { return {}; }
  std::mutex mutex;
  std::vector<std::vector<int32_t>> prompts;
};

// The byte codec, whose encode() waits while the gate is closed: a tokenization that takes as long
// as the test wants.
class GatedCodec : public TokenCodec {
 public:
  std::vector<int32_t> encode(std::string_view text) const override {
    std::unique_lock<std::mutex> lock(mutex_);
    ++entered_;
    changed_.notify_all();
    changed_.wait(lock, [this] { return open_; });
    return inner_->encode(text);
  }
  std::string token_bytes(int32_t id) const override { return inner_->token_bytes(id); }
  bool is_control(int32_t id) const override { return inner_->is_control(id); }
  int64_t vocab_size() const override { return inner_->vocab_size(); }
  const char* kind() const override { return "gated"; }

  void set_open(bool open) {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = open;
    changed_.notify_all();
  }
  int entered() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entered_;
  }
  void wait_entered(int n) const {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return entered_ >= n; });
  }

 protected:
  std::string decode_all(const std::vector<int32_t>& ids) const override {
    return inner_->decode(ids, false);
  }

 private:
  std::unique_ptr<TokenCodec> inner_ = make_byte_codec();
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  mutable int entered_ = 0;
  bool open_ = true;
};

// An exchange whose strand is the test thread: work posted from a worker waits in a queue until
// run_posted().
class StrandExchange : public HttpExchange {
 public:
  void post(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mutex_);
    posted_.push_back(std::move(fn));
    arrived_.notify_all();
  }
  void post_at(std::chrono::steady_clock::time_point, std::function<void()> fn) override {
    post(std::move(fn));
  }
  void respond(HttpResponse r) override {
    if (!open_) return;
    response = std::move(r);
    open_ = false;
  }
  void begin_stream(int, const std::string&) override {}
  void write(std::string) override {}
  void end_stream() override { open_ = false; }
  void on_abandon(std::function<void()> fn) override { abandon_ = std::move(fn); }
  bool open() const override { return open_; }

  // Waits until something was posted, then runs it on this thread.
  void run_posted() {
    std::unique_lock<std::mutex> lock(mutex_);
    ASSERT_TRUE(arrived_.wait_for(lock, 30s, [this] { return !posted_.empty(); }));
    auto fn = std::move(posted_.front());
    posted_.pop_front();
    lock.unlock();
    fn();
  }
  void client_leaves() {
    open_ = false;
    if (auto fn = std::move(abandon_)) fn();
  }
  json json_body() const { return json::parse(response->body); }

  std::optional<HttpResponse> response;

 private:
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<std::function<void()>> posted_;
  bool open_ = true;
  std::function<void()> abandon_;
};

class RouteLimitsTest : public ::testing::Test {
 protected:
  RouteLimitsTest() { make_routes(options()); }

  static RouteOptions options() {
    RouteOptions o;
    o.model = {"tinyglm-micro", 256, 320};
    o.kv_pool_tokens = 200;
    o.limits.max_messages = 3;
    o.limits.max_tools = 2;
    o.limits.max_prompt_bytes = 100;
    return o;
  }
  void make_routes(RouteOptions o) {
    routes_.reset();
    routes_ = std::make_unique<OpenAiRoutes>(std::move(o), engine_, codec_, metrics_);
  }

  // Hands one request to the routes as the connection does: an ApiError becomes the response.
  std::shared_ptr<StrandExchange> call(const std::string& method, const std::string& path,
                                       const json& body = nullptr, const std::string& auth = "") {
    auto ex = std::make_shared<StrandExchange>();
    HttpRequest r;
    r.method = method;
    r.path = path;
    r.body = body.is_null() ? "" : body.dump();
    r.authorization = auth;
    try {
      routes_->handle(r, ex);
    } catch (const ApiError& e) {
      ex->respond(HttpResponse::error(e));
    }
    return ex;
  }

  static json messages(int n) {
    json m = json::array();
    for (int i = 0; i < n; ++i) m.push_back({{"role", "user"}, {"content", "hi"}});
    return m;
  }

  // The error of a refused request: status, param, and the message naming limit and option.
  static void expect_limit(const StrandExchange& ex, const std::string& param,
                           const std::string& option) {
    ASSERT_TRUE(ex.response) << param;
    EXPECT_EQ(ex.response->status, 400);
    const json e = ex.json_body()["error"];
    EXPECT_EQ(e["param"], param);
    EXPECT_EQ(e["code"], "request_too_large");
    EXPECT_NE(e["message"].get<std::string>().find(option), std::string::npos) << e.dump();
  }

  CountingEngine engine_;
  GatedCodec codec_;
  Metrics metrics_;
  std::unique_ptr<OpenAiRoutes> routes_;
};

TEST_F(RouteLimitsTest, MessagesToolsAndPromptBytesBeyondTheLimitsAre400) {
  expect_limit(*call("POST", "/v1/chat/completions", {{"messages", messages(4)}}), "messages",
               "--max-messages");
  expect_limit(*call("POST", "/tokenize", {{"messages", messages(4)}}), "messages",
               "--max-messages");
  const json tool = {{"type", "function"}, {"function", {{"name", "f"}}}};
  expect_limit(*call("POST", "/v1/chat/completions",
                     {{"messages", messages(1)}, {"tools", {tool, tool, tool}}}),
               "tools", "--max-tools");
  const std::string big(101, 'x');
  expect_limit(*call("POST", "/v1/completions", {{"prompt", big}}), "prompt", "--max-prompt-bytes");
  expect_limit(*call("POST", "/tokenize", {{"prompt", big}}), "prompt", "--max-prompt-bytes");
  // 80 bytes of content fit the limit, but not once the template has wrapped them.
  expect_limit(*call("POST", "/v1/chat/completions",
                     {{"messages", {{{"role", "user"}, {"content", std::string(80, 'y')}}}}}),
               "messages", "--max-prompt-bytes");
  EXPECT_TRUE(engine_.prompts.empty());
  // At the limits: served.
  EXPECT_EQ(call("POST", "/tokenize", {{"prompt", std::string(100, 'x')}})->response->status, 200);
  EXPECT_EQ(call("POST", "/tokenize", {{"messages", messages(3)}})->response->status, 200);
}

TEST_F(RouteLimitsTest, ApiKeyLeavesHealthOpenAndMetricsOnlyWhenAsked) {
  RouteOptions o = options();
  o.api_key = "k3y";
  make_routes(o);
  EXPECT_EQ(call("GET", "/health")->response->status, 200);
  EXPECT_EQ(call("GET", "/metrics")->response->status, 401);
  EXPECT_EQ(call("POST", "/tokenize", {{"prompt", "a"}})->response->status, 401);
  o.metrics_without_auth = true;
  make_routes(o);
  EXPECT_EQ(call("GET", "/metrics")->response->status, 200);
  EXPECT_EQ(call("GET", "/v1/models")->response->status, 401);
  EXPECT_EQ(call("POST", "/detokenize", {{"tokens", {1}}})->response->status, 401);
}

TEST_F(RouteLimitsTest, TokenizingRunsOnAWorkerAndAFullQueueIs503AtOnce) {
  RouteOptions o = options();
  o.request_workers = 1;
  o.request_queue = 0;
  make_routes(o);
  codec_.set_open(false);
  // handle() returns while the worker is still tokenizing: the I/O thread is free.
  auto first = call("POST", "/v1/completions", {{"prompt", "hello"}, {"max_tokens", 4}});
  codec_.wait_entered(1);
  EXPECT_FALSE(first->response);
  // The only worker is busy and no request may wait: refused at once, with a retry hint.
  auto second = call("POST", "/tokenize", {{"prompt", "x"}});
  ASSERT_TRUE(second->response);
  EXPECT_EQ(second->response->status, 503);
  EXPECT_EQ(second->json_body()["error"]["code"], "server_busy");
  EXPECT_EQ(second->response->headers.at(0),
            (std::pair<std::string, std::string>{"Retry-After", "1"}));
  // The tokenizing ends; the generation starts back on the strand.
  codec_.set_open(true);
  first->run_posted();
  std::lock_guard<std::mutex> lock(engine_.mutex);
  ASSERT_EQ(engine_.prompts.size(), 1u);
  EXPECT_EQ(engine_.prompts[0].size(), 2u + 5u);  // [gMASK]<sop> + "hello"
}

TEST_F(RouteLimitsTest, WorkerErrorsComeBackAsResponses) {
  RouteOptions o = options();
  o.request_workers = 1;
  make_routes(o);
  auto bad = call("POST", "/tokenize", {{"prompt", std::string(101, 'x')}});
  bad->run_posted();
  ASSERT_TRUE(bad->response);
  EXPECT_EQ(bad->response->status, 400);
  auto ok = call("POST", "/tokenize", {{"prompt", "ab"}});
  ok->run_posted();
  EXPECT_EQ(ok->json_body()["count"], 4);
}

TEST_F(RouteLimitsTest, ARequestWhoseClientLeftWhileQueuedIsNotTokenized) {
  RouteOptions o = options();
  o.request_workers = 1;
  o.request_queue = 4;
  make_routes(o);
  codec_.set_open(false);
  auto busy = call("POST", "/tokenize", {{"prompt", "a"}});
  codec_.wait_entered(1);
  auto gone = call("POST", "/tokenize", {{"prompt", "b"}});
  gone->client_leaves();
  auto after = call("POST", "/tokenize", {{"prompt", "c"}});
  codec_.set_open(true);
  busy->run_posted();
  after->run_posted();
  EXPECT_EQ(after->json_body()["count"], 3);
  routes_->stop();
  EXPECT_FALSE(gone->response);
  // Three requests, two tokenized (each the prefix [gMASK]<sop>, then the prompt).
  EXPECT_EQ(codec_.entered(), 4);
}

}  // namespace
}  // namespace sparkglm::server
