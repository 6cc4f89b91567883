#pragma once
// The routes of sparkglm-serve: POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
// POST /tokenize, POST /detokenize, GET /health, GET /metrics. Bearer authentication on /v1/*
// when an API key is set. Unknown paths are 404, known paths with another method 405.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/server/generation_call.h"
#include "engine/server/generation_engine.h"
#include "engine/server/http_exchange.h"
#include "engine/server/openai_request.h"
#include "engine/server/token_codec.h"

namespace sparkglm::server {

class Metrics;

struct RouteOptions {
  ServedModel model;
  std::string api_key;           // "" = no authentication
  double request_timeout_s = 0;  // 0 = none
  int kv_pool_tokens = 0;        // what the whole KV pool holds; bounds the default max_tokens
  std::vector<int> eos_ids;
  // --sse-flush-interval: a running stream gathers its events this long before it writes them
  // (0: each engine step's events go out at once). See GenerationSetup.
  std::chrono::microseconds stream_flush_interval{0};
};

class OpenAiRoutes : public HttpHandler {
 public:
  OpenAiRoutes(RouteOptions options, GenerationEngine& engine, const TokenCodec& codec,
               Metrics& metrics);

  void handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) override;
  // From the first shutdown signal on: /health says 503, new generations are refused.
  void set_draining() { draining_.store(true); }

  const RouteOptions& options() const { return options_; }

 private:
  bool authorized(const HttpRequest& request) const;
  HttpResponse models() const;
  HttpResponse health() const;
  HttpResponse metrics_text() const;
  HttpResponse tokenize(const HttpRequest& request) const;
  HttpResponse detokenize(const HttpRequest& request) const;
  void chat_completion(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange);
  void completion(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange);
  // Checks the prompt against the limits, settles max_tokens, and starts the call.
  void generate(ApiKind kind, GenerationFields fields, std::vector<int32_t> prompt, bool thinking,
                std::shared_ptr<HttpExchange> exchange);

  RouteOptions options_;
  GenerationEngine& engine_;
  const TokenCodec& codec_;
  Metrics& metrics_;
  std::atomic<bool> draining_{false};
};

}  // namespace sparkglm::server
