// sparkglm-serve: the OpenAI-compatible server. Options come from the registry (flags, then
// --profile); the model from --preset or --model; the CPU reference backend runs the forward pass
// under the continuous-batching engine; Beast serves HTTP. SIGINT/SIGTERM drain and exit 0.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/core/build_info.h"
#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/core/thread_pool.h"
#include "engine/model/model_loader.h"
#include "engine/options/effective_config.h"
#include "engine/runtime/latent_cache.h"
#include "engine/runtime/serving_engine.h"
#include "engine/server/generation_engine.h"
#include "engine/server/http_server.h"
#include "engine/server/metrics.h"
#include "engine/server/openai_routes.h"
#include "engine/server/server_log.h"
#include "engine/server/token_codec.h"

namespace sparkglm {
namespace {

using server::log_line;

// Without --kv-cache-memory-bytes the CPU pool holds max-num-seqs full requests, up to this much.
constexpr size_t kCpuDefaultKvBudget = size_t(1) << 30;

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(int64_t(seconds * 1000.0));
}

std::unique_ptr<LoadedModel> load(const EffectiveConfig& c, ThreadPool& pool) {
  if (!c.str("model").empty()) return load_model_dir(c.str("model"));
  return load_model_preset(c.str("preset"), int(c.integer("num-layers")),
                           uint64_t(c.integer("seed")), pool);
}

std::unique_ptr<server::TokenCodec> codec_for(const EffectiveConfig& c, const LoadedModel& m) {
  if (!c.str("model").empty())
    return server::codec_for_model_dir(c.str("model"), m.config.vocab_size);
  if (m.config.vocab_size != server::make_byte_codec()->vocab_size())
    log_line("warning: preset " + c.str("preset") +
             " has no tokenizer; serving with the byte tokenizer (ids 0..319 only)");
  return server::make_byte_codec();
}

int serve(const std::vector<std::string>& args) {
  const EffectiveConfig cfg = parse_serve_args(args);
  log_line(std::string("sparkglm-serve ") + build_info().version + " (" + build_info().commit +
           ")");
  for (const std::string& line : cfg.log_lines()) log_line(line);
  log_line("effective config: " + cfg.canonical_json());
  log_line(cfg.summary());
  if (cfg.str("device") != "cpu")
    throw Error(ErrorKind::kUnsupported,
                "--device " + cfg.str("device") + ": this build serves on the CPU backend only");
  if (cfg.integer("world-size") != 1)
    throw Error(ErrorKind::kUnsupported, "--world-size above 1 is not served yet");

  set_default_thread_count(int(cfg.integer("threads")));
  ThreadPool& pool = default_thread_pool();
  const auto model = load(cfg, pool);
  const ModelConfig& mc = model->config;
  const std::string model_id = cfg.str("preset") == "glm-5.3-flash" ? "glm-5.3-flash" : model->name;

  const int max_seqs = int(cfg.integer("max-num-seqs"));
  const int block_size = int(cfg.integer("block-size"));
  const int max_seq_len = int(std::min<int64_t>(
      cfg.integer("max-seq-len") > 0 ? cfg.integer("max-seq-len") : mc.max_position_embeddings,
      INT_MAX / 2));
  const KvDtype kv_dtype = kv_dtype_from_string(cfg.str("kv-cache-dtype"));
  size_t budget = size_t(cfg.integer("kv-cache-memory-bytes"));
  if (budget == 0)
    budget = std::min(kCpuDefaultKvBudget,
                      LatentCache::bytes_per_block(mc, block_size, kv_dtype) *
                          size_t(int64_t(max_seqs) * (max_seq_len / block_size + 1)));
  const int num_blocks = LatentCache::blocks_for_budget(mc, block_size, kv_dtype, budget);
  if (num_blocks < 1)
    throw Error(ErrorKind::kInvalidArgument, "--kv-cache-memory-bytes=" + std::to_string(budget) +
                                                 " holds no KV block of " +
                                                 std::to_string(block_size) + " tokens");

  cpu::CpuRunnerOptions ro;
  ro.num_blocks = num_blocks;
  ro.block_size = block_size;
  ro.num_state_slots = max_seqs;
  ro.kv_dtype = kv_dtype;
  cpu::CpuModelRunner runner(mc, model->weights, ro, pool);

  SchedulerLimits limits;
  limits.max_num_seqs = max_seqs;
  limits.max_batch_size =
      cfg.integer("max-batch-size") > 0 ? int(cfg.integer("max-batch-size")) : max_seqs;
  limits.max_prefill_tokens = int(cfg.integer("max-prefill-tokens"));
  limits.max_seq_len = max_seq_len;
  const int pool_tokens = num_blocks * block_size;
  // The model half of the run identity (ARCHITECTURE.md), one JSON line that a harness can read.
  log_line("model identity: " + nlohmann::json{{"model_id", model_id},
                                               {"config_sha256", sha256_hex(mc.to_json().dump())},
                                               {"weights", model->weights.identity}}
                                    .dump());
  log_line("model " + model_id + ": " + std::to_string(mc.num_hidden_layers) + " layers, vocab " +
           std::to_string(mc.vocab_size) + ", " + std::to_string(pool.size()) + " CPU threads");
  log_line("KV pool: " + std::to_string(num_blocks) + " blocks of " + std::to_string(block_size) +
           " tokens = " + std::to_string(pool_tokens) + " tokens (" + cfg.str("kv-cache-dtype") +
           ", " + std::to_string(runner.latent_cache().bytes() >> 20) + " MiB); " +
           std::to_string(max_seqs) + " state slots; max-seq-len " + std::to_string(max_seq_len));

  const auto codec = codec_for(cfg, *model);
  auto engine = std::make_unique<ServingEngine>(runner, limits);
  server::ServingEngineAdapter adapter(*engine);
  server::Metrics metrics;
  server::RouteOptions route_options;
  route_options.model = {model_id, max_seq_len, mc.vocab_size};
  route_options.api_key = cfg.str("api-key");
  route_options.request_timeout_s = cfg.number("request-timeout");
  route_options.kv_pool_tokens = pool_tokens;
  route_options.eos_ids = mc.eos_token_ids;
  route_options.stream_flush_interval =
      std::chrono::microseconds(int64_t(cfg.number("sse-flush-interval") * 1e6));
  server::OpenAiRoutes routes(route_options, adapter, *codec, metrics);

  server::HttpServerOptions http;
  http.bind = cfg.str("bind");
  http.port = int(cfg.integer("port"));
  http.max_connections = int(cfg.integer("max-connections"));
  http.max_body_bytes = size_t(cfg.integer("max-body-bytes"));
  http.header_timeout = millis(cfg.number("header-timeout"));
  http.idle_timeout = millis(cfg.number("idle-timeout"));
  http.write_timeout = millis(cfg.number("write-timeout"));
  http.io_threads = int(cfg.integer("io-threads"));
  server::HttpServer http_server(http, routes, &metrics);
  // The engine goes before the server: its last events still reach live connections.
  struct EngineFirst {
    std::unique_ptr<ServingEngine>& engine;
    ~EngineFirst() { engine.reset(); }
  } engine_first{engine};

  http_server.start();
  log_line("tokenizer: " + std::string(codec->kind()) + ", vocab " +
           std::to_string(codec->vocab_size()) +
           (route_options.api_key.empty() ? "" : "; API key required on /v1/*"));
  log_line("listening on http://" + http.bind + ":" + std::to_string(http_server.port()));

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  int received = 0;
  sigwait(&signals, &received);
  const double grace = cfg.number("shutdown-grace");
  char grace_text[32];
  std::snprintf(grace_text, sizeof grace_text, "%g", grace);
  log_line(std::string("received ") + (received == SIGINT ? "SIGINT" : "SIGTERM") +
           ": no new connections; in-flight requests get " + grace_text + " s");
  routes.set_draining();
  http_server.stop_accepting();
  engine->shutdown(millis(grace));
  // Cancelled requests write their last events; give their connections a moment to close.
  const bool closed = http_server.wait_until_closed(std::chrono::milliseconds(2000));
  http_server.stop();
  log_line(std::string("stopped") + (closed ? "" : " (some connections were still open)"));
  return 0;
}

}  // namespace
}  // namespace sparkglm

int main(int argc, char** argv) {
  // Shutdown signals are taken by sigwait in the main thread only: every thread started later
  // inherits this mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& a : args) {
    if (a == "--version") {
      std::fputs(sparkglm::version_text("sparkglm-serve").c_str(), stdout);
      return 0;
    }
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: sparkglm-serve (--preset NAME | --model DIR | --profile NAME|FILE) "
          "[--option value ...]\n\n%s",
          sparkglm::serving_options().usage().c_str());
      return 0;
    }
  }
  try {
    return sparkglm::serve(args);
  } catch (const sparkglm::Error& e) {
    std::fprintf(stderr, "sparkglm-serve: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparkglm-serve: %s\n", e.what());
    return 1;
  }
}
