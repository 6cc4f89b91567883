// sparkglm-serve: the OpenAI-compatible server. Options come from the registry (flags, then
// --profile) into one ServingConfig (engine/options/serving_config.h); the model from --preset or
// --model; the runner factory builds the CPU reference or the CUDA backend (--device) under the
// continuous-batching engine; Beast serves HTTP.
// SIGINT/SIGTERM drain and exit 0; a device fault drains and exits 3 (a supervisor restarts it).
// With --tp-size N the process is one rank of N (docs/parallel.md): rank 0 serves HTTP and
// schedules, and sends each runner call to the other ranks, which replay it on their shards; a
// lost rank takes the server down like a device fault (503, exit 3).
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/runner_factory.h"
#include "engine/core/build_info.h"
#include "engine/core/cli_args.h"
#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/core/thread_pool.h"
#include "engine/dist/rank_fingerprint.h"
#include "engine/dist/rank_follower.h"
#include "engine/dist/rank_group.h"
#include "engine/dist/rank_leader.h"
#include "engine/model/model_loader.h"
#include "engine/model/precision_mode.h"
#include "engine/options/effective_config.h"
#include "engine/options/serving_config.h"
#include "engine/runtime/latent_cache.h"
#include "engine/runtime/serving_engine.h"
#include "engine/server/generation_engine.h"
#include "engine/server/http_server.h"
#include "engine/server/metrics.h"
#include "engine/server/openai_routes.h"
#include "engine/server/server_log.h"
#include "engine/server/shutdown_deadline.h"
#include "engine/server/token_codec.h"
#include "engine/text/grammar/compiled_grammar.h"

namespace sparkglm {
namespace {

using server::log_line;

// The exit status after a device fault: the device is unusable until the process restarts.
constexpr int kExitDeviceFault = 3;
// How long /health keeps answering 503 with the reason before the listener closes.
constexpr std::chrono::milliseconds kFaultHold{2000};

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(int64_t(seconds * 1000.0));
}

// A rank other than 0: replays rank 0's calls until it says stop. A signal ends the process (rank
// 0 then sees its connection close and stops too).
int follow_rank0(ModelRunner& runner, dist::RankGroup& ranks) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
  const std::string me = "rank " + std::to_string(ranks.rank());
  log_line(me + ": following rank 0's steps");
  try {
    const int64_t calls = dist::follow_rank0(runner, ranks.comm());
    log_line(me + ": stopped by rank 0 after " + std::to_string(calls) + " calls");
    return 0;
  } catch (const std::exception& e) {
    log_line(me + ": " + e.what() + "; exiting with status " + std::to_string(kExitDeviceFault));
    return kExitDeviceFault;
  }
}

int serve(const std::vector<std::string>& args) {
  const EffectiveConfig cfg = parse_serve_args(args);
  log_line(std::string("sparkglm-serve ") + build_info().version + " (" + build_info().commit +
           ")");
  for (const std::string& line : cfg.log_lines()) log_line(line);
  log_line("effective config: " + cfg.canonical_json());
  log_line(cfg.summary());
  // Every option, typed, in one place; a not-implemented option away from its default, a bad
  // API key source and the like are refused here, before the model loads.
  ServingConfig config = fill_serving_config(cfg);

  // Several ranks meet and compare fingerprints before a byte of the model loads.
  std::unique_ptr<dist::RankGroup> ranks;
  if (config.ranks.world_size > 1) {
    ranks = std::make_unique<dist::RankGroup>(config.ranks, args, dist::settings_fingerprint(cfg));
    config.runner.comm = &ranks->comm();
    // Ranks on one host share its cores unless --threads says otherwise.
    if (config.threads == 0)
      config.threads =
          std::max(1, int(std::thread::hardware_concurrency()) / config.ranks.world_size);
    log_line("rank " + std::to_string(ranks->rank()) + " of " +
             std::to_string(config.ranks.world_size) +
             ": every rank joined with the same settings");
  }

  set_default_thread_count(config.threads);
  ThreadPool& pool = default_thread_pool();
  BuiltRunner built = build_runner(config.runner, pool);
  dist::RankLeader* leader = nullptr;  // rank 0 of several: the runner the engine calls
  if (ranks) {
    dist::check_same_model(ranks->comm(), built.model_id + " config " +
                                              sha256_hex(built.config.to_json().dump()) +
                                              " weights " + built.weights_identity);
    if (ranks->rank() != 0) return follow_rank0(*built.runner, *ranks);
    auto wrapped = std::make_unique<dist::RankLeader>(std::move(built.runner), ranks->comm());
    leader = wrapped.get();
    built.runner = std::move(wrapped);
  }
  ModelRunner& runner = *built.runner;
  const ModelConfig& mc = built.config;
  const std::string model_id = built.model_id;
  config.scheduler.max_seq_len = built.max_seq_len;
  // Prefix-cache keys never match across models, weights, KV precisions or precision modes (spark
  // computes other latents and KDA states from the same checkpoint).
  config.scheduler.cache_identity = PrefixCache::identity(
      model_id + "|" + sha256_hex(mc.to_json().dump()) + "|" + built.weights_identity,
      std::string(to_string(config.runner.kv_dtype)) + "|" +
          precision_mode_name(config.runner.precision_mode));
  // The model half of the run identity (ARCHITECTURE.md), one JSON line that a harness can read.
  log_line("model identity: " + nlohmann::json{{"model_id", model_id},
                                               {"config_sha256", sha256_hex(mc.to_json().dump())},
                                               {"weights", built.weights_identity}}
                                    .dump());
  log_line("model " + model_id + ": " + std::to_string(mc.num_hidden_layers) + " layers, vocab " +
           std::to_string(mc.vocab_size) + ", device " + config.runner.device + ", " +
           std::to_string(pool.size()) + " CPU threads");
  for (const std::string& line : built.log_lines) log_line(line);

  const auto codec = server::codec_for_model(config.runner.model_dir, config.runner.preset, mc);
  auto engine = std::make_unique<ServingEngine>(runner, config.scheduler);
  if (const std::string disk = engine->disk_tier_summary(); !disk.empty())
    log_line("prefix cache disk tier: " + disk);
  server::ServingEngineAdapter adapter(*engine);
  server::Metrics metrics;
  server::RouteOptions& route_options = config.routes;
  route_options.model = {model_id, built.max_seq_len, mc.vocab_size};
  route_options.kv_pool_tokens = built.pool_tokens;
  route_options.max_num_seqs = config.scheduler.max_num_seqs;
  route_options.eos_ids = mc.eos_token_ids;
  // Output constraints compile at admission against the vocabulary the scheduler masks.
  route_options.compile_constraint =
      [vocabulary = server::grammar_vocabulary(
           *codec, mc.vocab_size,
           std::vector<int32_t>(mc.eos_token_ids.begin(), mc.eos_token_ids.end()))](
          const OutputConstraint& c) { return compile_output_constraint(c, vocabulary); };
  server::OpenAiRoutes routes(route_options, adapter, *codec, metrics);

  const server::HttpServerOptions& http = config.http;
  server::HttpServer http_server(http, routes, &metrics);
  // The engine goes before the server: its last events still reach live connections.
  struct EngineFirst {
    std::unique_ptr<ServingEngine>& engine;
    ~EngineFirst() { engine.reset(); }
  } engine_first{engine};

  http_server.start();
  // Token events leave on the engine thread, as they are made (see run_ready_handlers).
  engine->set_after_step([&http_server] { http_server.run_ready_handlers(); });
  log_line("tokenizer: " + std::string(codec->kind()) + ", vocab " +
           std::to_string(codec->vocab_size()) +
           (route_options.api_key.empty() ? "" : "; API key required on every route but /health"));
  log_line("listening on http://" + http.bind + ":" + std::to_string(http_server.port()));

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  // Waits for a shutdown signal or a device fault, whichever comes first.
  int received = 0;
  std::string fatal, lost;
  const timespec no_wait{0, 0};
  while (received <= 0 && fatal.empty() && lost.empty()) {
    received = sigtimedwait(&signals, nullptr, &no_wait);
    if (received <= 0) fatal = engine->wait_for_fault(std::chrono::milliseconds(100));
    if (ranks && fatal.empty()) lost = ranks->lost();
  }
  if (!lost.empty()) {
    // New requests get 503 at once; those in flight fail at their next collective (503 too).
    routes.set_draining();
    fatal = engine->wait_for_fault(kFaultHold);
    if (fatal.empty()) fatal = "a rank is gone: " + lost;
  }
  if (!fatal.empty()) {
    // The engine has already ended every request with a 503; /health says why while their
    // connections finish, then the process exits for its supervisor to restart it.
    log_line("engine fatal: " + fatal + "; draining and exiting with status " +
             std::to_string(kExitDeviceFault) + " (restart the server)");
    // Probes (and `sparkglm status`) get a moment to read the reason from /health.
    std::this_thread::sleep_for(kFaultHold);
    http_server.stop_accepting();
    const bool closed = http_server.wait_until_closed(std::chrono::milliseconds(2000));
    http_server.stop();
    log_line(std::string("stopped after a device fault") +
             (closed ? "" : " (some connections were still open)"));
    return kExitDeviceFault;
  }
  const double grace = config.shutdown_grace_s;
  char grace_text[32];
  std::snprintf(grace_text, sizeof grace_text, "%g", grace);
  log_line(std::string("received ") + (received == SIGINT ? "SIGINT" : "SIGTERM") +
           ": no new connections; in-flight requests get " + grace_text + " s");
  // A hung engine step cannot hold the process past the grace.
  const auto deadline = server::arm_shutdown_deadline(grace);
  routes.set_draining();
  http_server.stop_accepting();
  engine->shutdown(millis(grace));
  if (leader) {  // the engine is done with the runner: the other ranks may stop
    engine.reset();
    leader->stop();
    if (!ranks->wait_for_ranks()) log_line("warning: a rank did not exit cleanly");
  }
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
    sparkglm::refuse_non_utf8_arguments(args);
    return sparkglm::serve(args);
  } catch (const sparkglm::Error& e) {
    std::fprintf(stderr, "sparkglm-serve: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparkglm-serve: %s\n", e.what());
    return 1;
  }
}
