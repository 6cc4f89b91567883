#include "engine/server/openai_routes.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>

#include "engine/core/build_info.h"
#include "engine/server/api_error.h"
#include "engine/server/metrics.h"
#include "engine/server/server_log.h"

namespace sparkglm::server {

using nlohmann::json;

namespace {

struct Route {
  const char* path;
  const char* method;
};
constexpr Route kRoutes[] = {
    {"/v1/chat/completions", "POST"},
    {"/v1/completions", "POST"},
    {"/v1/models", "GET"},
    {"/tokenize", "POST"},
    {"/detokenize", "POST"},
    {"/health", "GET"},
    {"/metrics", "GET"},
    {"/version", "GET"},
};

// Compares without an early exit, so the time taken does not tell how much of a key matched.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

}  // namespace

OpenAiRoutes::OpenAiRoutes(RouteOptions options, GenerationEngine& engine, const TokenCodec& codec,
                           Metrics& metrics)
    : options_(std::move(options)), engine_(engine), codec_(codec), metrics_(metrics) {
  if (options_.request_workers > 0)
    workers_ = std::make_unique<RequestWorkers>(options_.request_workers, options_.request_queue);
}

void OpenAiRoutes::stop() {
  if (workers_) workers_->stop();
}

void OpenAiRoutes::handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
  const Route* route = nullptr;
  bool path_known = false;
  for (const Route& r : kRoutes) {
    if (request.path != r.path) continue;
    path_known = true;
    if (request.method == r.method) route = &r;
  }
  if (!path_known) throw ApiError::route_not_found(request.method, request.path);
  if (!route) {
    std::string allowed;
    for (const Route& r : kRoutes)
      if (request.path == r.path) allowed += (allowed.empty() ? "" : ", ") + std::string(r.method);
    HttpResponse r =
        HttpResponse::error(ApiError::method_not_allowed(request.method, request.path, allowed));
    r.headers.emplace_back("Allow", allowed);
    return exchange->respond(std::move(r));
  }
  const std::string& p = request.path;
  // A load balancer probes /health without credentials; a scraper may be let in to /metrics.
  const bool open_route = p == "/health" || (p == "/metrics" && options_.metrics_without_auth);
  if (!open_route && !authorized(request)) throw ApiError::unauthorized();

  if (p == "/health") return exchange->respond(health());
  if (p == "/metrics") return exchange->respond(metrics_text());
  if (p == "/v1/models") return exchange->respond(models());
  if (p == "/version") return exchange->respond(version());
  offload(std::move(request), std::move(exchange));
}

void OpenAiRoutes::offload(HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
  if (!workers_) return prepare(request, std::move(exchange))();
  // A client that leaves while its request waits for a worker costs no work.
  auto left = std::make_shared<std::atomic<bool>>(false);
  exchange->on_abandon([left] { left->store(true); });
  auto job = [this, request = std::move(request), exchange, left] {
    if (left->load()) return;
    Continuation next;
    try {
      next = prepare(request, exchange);
    } catch (const ApiError& e) {
      next = [exchange, e] { exchange->respond(HttpResponse::error(e)); };
    } catch (const Error& e) {
      next = [exchange, e = api_error_from(e)] { exchange->respond(HttpResponse::error(e)); };
    } catch (const std::exception& e) {
      log_line(std::string("internal error: ") + e.what());
      next = [exchange, e = ApiError::internal(e.what())] {
        exchange->respond(HttpResponse::error(e));
      };
    }
    exchange->post([exchange, next = std::move(next)] {
      if (!exchange->open()) return;
      try {
        next();
      } catch (const ApiError& e) {
        exchange->respond(HttpResponse::error(e));
      } catch (const std::exception& e) {
        log_line(std::string("internal error: ") + e.what());
        exchange->respond(HttpResponse::error(ApiError::internal(e.what())));
      }
    });
  };
  if (!workers_->try_post(std::move(job))) {
    HttpResponse busy = HttpResponse::error(ApiError(
        503, "server_error", "server_busy",
        "every request worker is busy and " + std::to_string(workers_->max_queued()) +
            " requests already wait for one (--request-workers, --request-queue); retry later"));
    busy.headers.emplace_back("Retry-After", "1");
    exchange->respond(std::move(busy));
  }
}

OpenAiRoutes::Continuation OpenAiRoutes::prepare(const HttpRequest& request,
                                                 std::shared_ptr<HttpExchange> exchange) {
  const std::string& p = request.path;
  if (p == "/tokenize")
    return [exchange, r = tokenize(request)]() mutable { exchange->respond(std::move(r)); };
  if (p == "/detokenize")
    return [exchange, r = detokenize(request)]() mutable { exchange->respond(std::move(r)); };
  if (p == "/v1/chat/completions") return chat_completion(request, std::move(exchange));
  return completion(request, std::move(exchange));
}

bool OpenAiRoutes::authorized(const HttpRequest& request) const {
  if (options_.api_key.empty()) return true;
  // RFC 9110 section 11.1: the scheme name is case-insensitive ("bearer" is "Bearer"), and one
  // or more spaces separate it from the token.
  const std::string& a = request.authorization;
  constexpr std::string_view kScheme = "bearer";
  if (a.size() <= kScheme.size() || a[kScheme.size()] != ' ') return false;
  for (size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != kScheme[i]) return false;
  const size_t token = a.find_first_not_of(' ', kScheme.size());
  return token != std::string::npos && same_secret(a.substr(token), options_.api_key);
}

HttpResponse OpenAiRoutes::models() const {
  const json model = {{"id", options_.model.id},
                      {"object", "model"},
                      {"created", unix_seconds()},
                      {"owned_by", "sparkglm"},
                      {"max_model_len", options_.model.max_seq_len}};
  return HttpResponse::json(200, {{"object", "list"}, {"data", json::array({model})}});
}

HttpResponse OpenAiRoutes::health() const {
  // A device fault outranks a drain: it is why the server is going away.
  if (const std::string fatal = engine_.stats().fatal; !fatal.empty())
    return HttpResponse::error(ApiError::device_fault(fatal));
  if (draining_.load()) return HttpResponse::error(ApiError::shutting_down());
  return HttpResponse::json(200, {{"status", "ok"}});
}

HttpResponse OpenAiRoutes::metrics_text() const {
  return HttpResponse::text(200, "text/plain; version=0.0.4; charset=utf-8",
                            metrics_.render(engine_.stats()));
}

HttpResponse OpenAiRoutes::version() const {
  const BuildInfo& b = build_info();
  return HttpResponse::json(200, {{"version", b.version},
                                  {"commit", b.commit},
                                  {"clean_tree", b.clean_tree},
                                  {"compiler", b.compiler},
                                  {"build_type", b.build_type},
                                  {"cuda", b.cuda_version},
                                  {"nccl", b.nccl_version}});
}

std::shared_ptr<const CompiledGrammar> OpenAiRoutes::compile(const GenerationFields& f) const {
  if (!f.constraint.active()) return nullptr;
  const std::string& field = f.constraint_field;
  if (!options_.compile_constraint)
    throw ApiError::invalid_request("`" + field +
                                        "` constrains the output, and this engine applies no "
                                        "output constraints",
                                    field);
  try {
    return options_.compile_constraint(f.constraint);
  } catch (const Error& e) {
    throw ApiError::invalid_request("`" + field + "`: " + e.message(), field);
  }
}

HttpResponse OpenAiRoutes::tokenize(const HttpRequest& request) const {
  const json fields = parse_json_body(request.body);
  check_message_counts(fields, options_.limits);
  const TokenizeRequest r = parse_tokenize(fields, options_.model);
  std::vector<int32_t> ids;
  if (r.add_special_tokens) ids = codec_.prefix();
  const std::string text = r.prompt ? *r.prompt : r.chat->render();
  check_prompt_bytes(text.size(), options_.limits, r.prompt ? "prompt" : "messages");
  const std::vector<int32_t> body = codec_.encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  return HttpResponse::json(
      200, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", options_.model.max_seq_len}});
}

HttpResponse OpenAiRoutes::detokenize(const HttpRequest& request) const {
  const DetokenizeRequest r = parse_detokenize(parse_json_body(request.body), options_.model);
  return HttpResponse::json(200, {{"prompt", codec_.decode(r.tokens, r.skip_special_tokens)}});
}

OpenAiRoutes::Continuation OpenAiRoutes::chat_completion(const HttpRequest& request,
                                                         std::shared_ptr<HttpExchange> exchange) {
  const json json_body = parse_json_body(request.body);
  check_message_counts(json_body, options_.limits);
  auto r =
      std::make_shared<ChatCompletionRequest>(parse_chat_completion(json_body, options_.model));
  std::vector<int32_t> prompt;
  if (r->add_special_tokens) prompt = codec_.prefix();
  const std::string text = r->chat.render();
  check_prompt_bytes(text.size(), options_.limits, "messages");
  const std::vector<int32_t> body = codec_.encode(text);
  prompt.insert(prompt.end(), body.begin(), body.end());
  GenerationSetup setup;
  setup.kind = ApiKind::kChat;
  setup.thinking = thinking_enabled(r->chat.options) && r->chat.options.add_generation_prompt;
  setup.grammar = compile(r->fields);
  if (r->parses_tool_calls()) setup.tools = r->chat.options.tools;
  setup.parallel_tool_calls = r->parallel_tool_calls;
  setup.fields = std::move(r->fields);
  setup.prompt = std::move(prompt);
  return [this, setup = std::move(setup), exchange]() mutable {
    generate(std::move(setup), exchange);
  };
}

OpenAiRoutes::Continuation OpenAiRoutes::completion(const HttpRequest& request,
                                                    std::shared_ptr<HttpExchange> exchange) {
  auto r = std::make_shared<CompletionRequest>(
      parse_completion(parse_json_body(request.body), options_.model));
  std::vector<int32_t> prompt;
  if (r->prompt_text) {
    check_prompt_bytes(r->prompt_text->size(), options_.limits, "prompt");
    if (r->add_special_tokens) prompt = codec_.prefix();
    const std::vector<int32_t> body = codec_.encode(*r->prompt_text);
    prompt.insert(prompt.end(), body.begin(), body.end());
  } else {
    prompt = std::move(r->prompt_ids);
  }
  GenerationSetup setup;
  setup.kind = ApiKind::kCompletion;
  setup.grammar = compile(r->fields);
  setup.fields = std::move(r->fields);
  setup.prompt = std::move(prompt);
  return [this, setup = std::move(setup), exchange]() mutable {
    generate(std::move(setup), exchange);
  };
}

void OpenAiRoutes::generate(GenerationSetup setup, std::shared_ptr<HttpExchange> exchange) {
  if (draining_.load()) throw ApiError::shutting_down();
  const ApiKind kind = setup.kind;
  GenerationFields& fields = setup.fields;
  // The n choices are meant to run side by side; more than the engine ever runs at once would
  // only run one after another, so such an n is refused rather than queued against itself.
  if (options_.max_num_seqs > 0 && fields.n > options_.max_num_seqs)
    throw ApiError::invalid_request("`n` (" + std::to_string(fields.n) +
                                        ") asks for more sequences than this server runs at once "
                                        "(--max-num-seqs " +
                                        std::to_string(options_.max_num_seqs) + ")",
                                    "n");
  const int n = int(setup.prompt.size());
  const char* prompt_field = kind == ApiKind::kChat ? "messages" : "prompt";
  const int limit = options_.model.max_seq_len;
  if (n == 0) throw ApiError::invalid_request("the prompt is empty", prompt_field);
  if (n >= limit) throw ApiError::prompt_too_long(n, limit, prompt_field);
  if (fields.max_tokens) {
    if (int64_t(n) + *fields.max_tokens > limit)
      throw ApiError::invalid_request(
          "this server's limit (--max-seq-len) is " + std::to_string(limit) +
              " tokens for prompt and output together; the request asks for " + std::to_string(n) +
              " prompt + " + std::to_string(*fields.max_tokens) + " output tokens",
          "max_tokens");
    fields.sampling.max_tokens = *fields.max_tokens;
  } else {
    // OpenAI's default is "the rest of the context"; the KV pool reserves it whole, so it is
    // bounded by the pool too.
    const int room =
        std::min(limit, options_.kv_pool_tokens > 0 ? options_.kv_pool_tokens : limit) - n;
    if (room < 1)
      throw ApiError::invalid_request("the prompt has " + std::to_string(n) +
                                          " tokens and leaves no room for output in this "
                                          "server's KV pool of " +
                                          std::to_string(options_.kv_pool_tokens) + " tokens",
                                      prompt_field);
    fields.sampling.max_tokens = room;
  }
  if (fields.sampling.min_tokens > fields.sampling.max_tokens)
    throw ApiError::invalid_request("`min_tokens` (" + std::to_string(fields.sampling.min_tokens) +
                                        ") is more than the output allowed (" +
                                        std::to_string(fields.sampling.max_tokens) + " tokens)",
                                    "min_tokens");

  setup.model_id = options_.model.id;
  setup.eos_ids = options_.eos_ids;
  setup.request_timeout_s = options_.request_timeout_s;
  setup.flush_interval = options_.stream_flush_interval;
  auto call = std::make_shared<GenerationCall>(std::move(setup), codec_, &metrics_, exchange);
  try {
    call->start(engine_);
  } catch (const ApiError&) {
    // The engine stops admitting once shutdown began; that refusal is not the request's fault.
    if (draining_.load()) throw ApiError::shutting_down();
    throw;
  }
}

}  // namespace sparkglm::server
