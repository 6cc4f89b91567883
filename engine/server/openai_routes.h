#pragma once
// The routes of sparkglm-serve: POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
// POST /tokenize, POST /detokenize, GET /health, GET /metrics, GET /version (build identity). With
// an API key, every route but /health needs it as a Bearer token (/metrics too, unless
// metrics_without_auth opens it for a scraper). Unknown paths are 404, known paths with another
// method 405.
//
// Threads: handle() runs on the connection's strand (an I/O thread) and answers only what is cheap
// there (/health, /metrics, /v1/models, refusals). Reading a body, rendering the chat template
// and tokenizing run on the request workers, within RequestLimits; the result comes back to the
// strand, which answers or starts the generation. A full worker queue is a 503 at once.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/server/generation_call.h"
#include "engine/server/generation_engine.h"
#include "engine/server/http_exchange.h"
#include "engine/server/openai_request.h"
#include "engine/server/request_limits.h"
#include "engine/server/request_workers.h"
#include "engine/server/token_codec.h"

namespace sparkglm::server {

class Metrics;

struct RouteOptions {
  ServedModel model;
  std::string api_key;  // "" = no authentication
  bool metrics_without_auth = false;
  RequestLimits limits;
  // Threads for the request work described above; 0 runs it inline on the strand (unit tests).
  int request_workers = 0;
  size_t request_queue = 64;     // requests waiting for a worker at most
  double request_timeout_s = 0;  // 0 = none
  int kv_pool_tokens = 0;        // what the whole KV pool holds; bounds the default max_tokens
  // --max-num-seqs: sequences the engine runs at once. A request's `n` choices are n sequences,
  // and n above this is refused (0: no bound, unit tests).
  int max_num_seqs = 0;
  std::vector<int> eos_ids;
  // --sse-flush-interval: a running stream gathers its events this long before it writes them
  // (0: each engine step's events go out at once). See GenerationSetup.
  std::chrono::microseconds stream_flush_interval{0};
  // Compiles a request's output constraint (response_format, structured_outputs, guided_*, a
  // forced tool call) for the engine's token mask: compile_output_constraint over the model's
  // vocabulary. Its Error naming an unsupported keyword is a 400 naming the request's field.
  // Unset: this engine applies no constraints, and a request that asks for one is a 400.
  std::function<std::shared_ptr<const CompiledGrammar>(const OutputConstraint&)> compile_constraint;
};

class OpenAiRoutes : public HttpHandler {
 public:
  OpenAiRoutes(RouteOptions options, GenerationEngine& engine, const TokenCodec& codec,
               Metrics& metrics);

  void handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) override;
  void stop() override;  // joins the request workers
  // From the first shutdown signal on: /health says 503, new generations are refused.
  void set_draining() { draining_.store(true); }

  const RouteOptions& options() const { return options_; }

 private:
  // What runs on the strand once a request's work is done.
  using Continuation = std::function<void()>;

  bool authorized(const HttpRequest& request) const;
  HttpResponse models() const;
  HttpResponse health() const;
  HttpResponse metrics_text() const;
  HttpResponse version() const;
  // The grammar for fields.constraint (null when it is inactive); 400 when it cannot be applied.
  std::shared_ptr<const CompiledGrammar> compile(const GenerationFields& fields) const;
  // Runs prepare() on a worker (or inline without workers) and its continuation on the strand.
  void offload(HttpRequest request, std::shared_ptr<HttpExchange> exchange);
  // The worker's part of a body route: parse, check the limits, render, tokenize.
  Continuation prepare(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange);
  HttpResponse tokenize(const HttpRequest& request) const;
  HttpResponse detokenize(const HttpRequest& request) const;
  Continuation chat_completion(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange);
  Continuation completion(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange);
  // Checks the prompt against the limits, settles max_tokens, and starts the call. `setup` comes
  // with kind, fields, prompt, thinking, grammar and tools set.
  void generate(GenerationSetup setup, std::shared_ptr<HttpExchange> exchange);

  RouteOptions options_;
  GenerationEngine& engine_;
  const TokenCodec& codec_;
  Metrics& metrics_;
  std::atomic<bool> draining_{false};
  std::unique_ptr<RequestWorkers> workers_;  // last: joined before the rest goes
};

}  // namespace sparkglm::server
