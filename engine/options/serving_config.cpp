#include "engine/options/serving_config.h"

#include <algorithm>
#include <chrono>
#include <climits>

#include "engine/core/error.h"
#include "engine/model/precision_mode.h"
#include "engine/options/api_key_source.h"
#include "engine/runtime/speculation/speculative_rollback.h"
#include "engine/server/request_limits.h"

namespace sparkglm {
namespace {

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(int64_t(seconds * 1000.0));
}

int as_int(int64_t v) {
  return int(std::clamp<int64_t>(v, INT_MIN, INT_MAX));
}

// Each fill reads every option it consumes unconditionally (the registry test counts the reads
// of a default configuration), then derives what depends on another option.

void fill_runner(const EffectiveConfig& c, RunnerRequest& r) {
  r.device = c.str("device");
  r.preset = c.str("preset");
  r.model_dir = c.str("model");
  r.num_layers = as_int(c.integer("num-layers"));
  r.seed = uint64_t(c.integer("seed"));
  r.precision_mode = precision_mode_from_name(c.str("precision-mode"));
  r.weight_format = checkpoint_format_from_name(c.str("weight-format"));
  r.block_size = as_int(c.integer("block-size"));
  r.max_num_seqs = as_int(c.integer("max-num-seqs"));
  r.max_seq_len = int(std::min<int64_t>(c.integer("max-seq-len"), INT_MAX / 2));
  r.kv_dtype = kv_dtype_from_string(c.str("kv-cache-dtype"));
  r.kv_cache_bytes = size_t(c.integer("kv-cache-memory-bytes"));
  r.kv_shard = c.str("kv-shard") == "on";
  r.gpu_memory_utilization = c.number("gpu-memory-utilization");
  r.cuda_graphs = !c.boolean("enforce-eager");
  r.profile_steps = c.boolean("profile-steps");
  r.inject_device_fault_after_steps = c.integer("inject-device-fault-after-steps");
  const int64_t snapshots = c.integer("prefix-cache-snapshots");
  r.num_snapshots = c.boolean("enable-prefix-caching") ? as_int(snapshots) : 0;
  r.state_records =
      speculative_state_records(as_int(c.integer("speculative-tokens")),
                                speculative_rollback_from_name(c.str("speculative-rollback")));
  r.prefix_disk_tier = c.integer("prefix-cache-gb") > 0;
}

void fill_scheduler(const EffectiveConfig& c, SchedulerLimits& s) {
  s.max_num_seqs = as_int(c.integer("max-num-seqs"));
  const int64_t batch = c.integer("max-batch-size");
  s.max_batch_size = batch > 0 ? as_int(batch) : s.max_num_seqs;
  s.max_prefill_tokens = as_int(c.integer("max-prefill-tokens"));
  s.max_seq_len = int(std::min<int64_t>(c.integer("max-seq-len"), INT_MAX / 2));
  // cache_identity is the model's: the caller sets it once the runner is built.
  s.prefix_caching = c.boolean("enable-prefix-caching");
  s.snapshot_every_chunks = as_int(c.integer("prefix-snapshot-every"));
  s.speculative_tokens = as_int(c.integer("speculative-tokens"));
  s.speculative_rollback = speculative_rollback_from_name(c.str("speculative-rollback"));
  s.prefix_cache_dir = c.str("prefix-cache-dir");
  s.prefix_cache_bytes = uint64_t(c.integer("prefix-cache-gb")) << 30;
}

// The disk tier's options agree with each other and with the backend (before the model loads).
void check_disk_tier(const ServingConfig& s) {
  const std::string& dir = s.scheduler.prefix_cache_dir;
  const uint64_t gib = s.scheduler.prefix_cache_bytes >> 30;
  if (dir.empty() && gib == 0) return;
  if (dir.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "--prefix-cache-gb " + std::to_string(gib) +
                    " needs --prefix-cache-dir (the directory of the disk tier)");
  if (gib == 0)
    throw Error(ErrorKind::kInvalidArgument,
                "--prefix-cache-dir " + dir + " needs --prefix-cache-gb N (N > 0 GiB)");
  if (!s.scheduler.prefix_caching)
    throw Error(ErrorKind::kInvalidArgument,
                "--prefix-cache-dir " + dir + ": the disk tier needs --enable-prefix-caching");
}

// Speculation runs where its verify step does (docs/speculative-decoding.md says what the ranks
// still lack).
void check_speculation(const ServingConfig& s) {
  const int k = s.scheduler.speculative_tokens;
  if (k == 0) return;
  const std::string flag = "--speculative-tokens " + std::to_string(k);
  if (s.ranks.world_size > 1)
    throw Error(ErrorKind::kUnsupported,
                flag + " with " + std::to_string(s.ranks.world_size) +
                    " ranks: not implemented yet (its calls pass through the ranks, but no "
                    "test checks its output there yet, docs/parallel.md); it runs on one rank");
}

void fill_routes(const EffectiveConfig& c, server::RouteOptions& r) {
  r.api_key = resolve_api_key({c.str("api-key"), c.str("api-key-file"), c.str("api-key-env")});
  r.metrics_without_auth = c.boolean("metrics-without-auth");
  r.limits = server::request_limits_from(c);
  r.request_workers = as_int(c.integer("request-workers"));
  r.request_queue = size_t(c.integer("request-queue"));
  r.request_timeout_s = c.number("request-timeout");
  r.stream_flush_interval =
      std::chrono::microseconds(int64_t(c.number("sse-flush-interval") * 1e6));
}

void fill_ranks(const EffectiveConfig& c, dist::RankSettings& r) {
  const int64_t world = c.integer("world-size"), tp = c.integer("tp-size");
  r.world_size = as_int(std::max(world, tp));  // check_serving: world-size is 1 or tp-size
  r.rank = as_int(c.integer("rank"));
  r.launch = r.world_size > 1 && c.source("rank") != ValueSource::kCommandLine;
  r.master_addr = c.str("master-addr");
  r.master_port = as_int(c.integer("master-port"));
}

void fill_http(const EffectiveConfig& c, server::HttpServerOptions& h) {
  h.bind = c.str("bind");
  h.port = as_int(c.integer("port"));
  h.max_connections = as_int(c.integer("max-connections"));
  h.max_body_bytes = size_t(c.integer("max-body-bytes"));
  h.header_timeout = millis(c.number("header-timeout"));
  h.idle_timeout = millis(c.number("idle-timeout"));
  h.write_timeout = millis(c.number("write-timeout"));
  h.io_threads = as_int(c.integer("io-threads"));
}

}  // namespace

void check_implemented(const EffectiveConfig& config) {
  for (const OptionSpec& s : config.registry().specs()) {
    if (s.not_implemented.empty() || config.peek(s.name) == s.builtin) continue;
    std::string where = "--" + s.name + "=" + s.format(config.peek(s.name));
    if (config.source(s.name) == ValueSource::kProfile)
      where += " (profile " + config.profile_name() + ")";
    throw Error(ErrorKind::kUnsupported, where + ": not implemented yet (" + s.not_implemented +
                                             "); only the default " + s.format(s.builtin) +
                                             " is accepted");
  }
}

ServingConfig fill_serving_config(const EffectiveConfig& config) {
  check_implemented(config);
  ServingConfig s;
  fill_runner(config, s.runner);
  fill_scheduler(config, s.scheduler);
  check_disk_tier(s);
  // The device workspaces hold a step: a full prefill chunk and a decode slice per sequence (one
  // row, or a verify slice's: speculative_slice_rows).
  s.runner.decode_slice_rows =
      speculative_slice_rows(s.scheduler.speculative_tokens, s.scheduler.speculative_rollback);
  s.runner.max_tokens_per_step =
      s.scheduler.max_prefill_tokens + s.scheduler.max_batch_size * s.runner.decode_slice_rows;
  fill_routes(config, s.routes);
  fill_http(config, s.http);
  fill_ranks(config, s.ranks);
  check_speculation(s);
  s.threads = as_int(config.integer("threads"));
  s.shutdown_grace_s = config.number("shutdown-grace");
  return s;
}

}  // namespace sparkglm
