// The one table of `sparkglm-serve` options. Names and meanings follow the Atlas serve flags where
// Atlas has one (max-seq-len, max-num-seqs, max-batch-size, max-prefill-tokens, block-size,
// kv-cache-dtype, gpu-memory-utilization, enable-prefix-caching, world-size, tp-size,
// request-timeout). A default that moves away from the built-in needs a receipt (QUALIFICATION.md).
// Defaults the engine's own structs also carry (SchedulerLimits, RunnerRequest) are taken from
// them, so the two cannot disagree. Every option is consumed by fill_serving_config
// (serving_config.cpp) or marked not_implemented; tests/options/serving_config_test.cpp checks it.
#include <cstdint>

#include "engine/backend/runner_factory.h"
#include "engine/model/config.h"
#include "engine/model/precision_mode.h"
#include "engine/options/option_registry.h"
#include "engine/runtime/scheduler.h"
#include "engine/runtime/speculation/speculative_rollback.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {
namespace {

constexpr int64_t kMaxContext = 1048576;  // MODEL.md: max_position_embeddings

OptionSpec base(std::string name, OptionType type, OptionValue value, ProfileSection section,
                std::string help) {
  OptionSpec s;
  s.name = std::move(name);
  s.type = type;
  s.default_value = value;
  s.builtin = std::move(value);
  s.section = section;
  s.help = std::move(help);
  return s;
}

OptionSpec flag(std::string name, bool value, ProfileSection section, std::string help) {
  return base(std::move(name), OptionType::kBool, value, section, std::move(help));
}

OptionSpec integer(std::string name, int64_t value, int64_t min, int64_t max,
                   ProfileSection section, std::string help) {
  OptionSpec s = base(std::move(name), OptionType::kInt, value, section, std::move(help));
  s.min_int = min;
  s.max_int = max;
  return s;
}

OptionSpec bytes(std::string name, int64_t value, int64_t min, int64_t max, ProfileSection section,
                 std::string help) {
  OptionSpec s = integer(std::move(name), value, min, max, section, std::move(help));
  s.type = OptionType::kBytes;
  return s;
}

OptionSpec real(std::string name, double value, double min, double max, ProfileSection section,
                std::string help) {
  OptionSpec s = base(std::move(name), OptionType::kFloat, value, section, std::move(help));
  s.min_float = min;
  s.max_float = max;
  return s;
}

OptionSpec text(std::string name, std::string value, ProfileSection section, std::string help) {
  return base(std::move(name), OptionType::kString, std::move(value), section, std::move(help));
}

OptionSpec choice(std::string name, std::string value, std::vector<std::string> allowed,
                  ProfileSection section, std::string help) {
  OptionSpec s =
      base(std::move(name), OptionType::kEnum, std::move(value), section, std::move(help));
  s.allowed = std::move(allowed);
  return s;
}

OptionSpec grouped(OptionSpec s, std::string group) {
  s.group = std::move(group);
  return s;
}

std::vector<OptionSpec> serving_table() {
  using P = ProfileSection;
  constexpr int64_t kMiB = int64_t(1) << 20;
  constexpr double kWeek = 7 * 24 * 3600;
  const SchedulerLimits limits;
  const RunnerRequest runner;
  std::vector<OptionSpec> t = {
      // Model source: exactly one of preset | model.
      grouped(choice("preset", "", preset_names(), P::kTopLevel,
                     "built-in model geometry with dummy weights (profile field `model`)"),
              "model-source"),
      grouped(text("model", "", P::kTopLevel, "checkpoint directory (profile field `model`)"),
              "model-source"),
      integer("num-layers", 0, 0, 1024, P::kOptions,
              "cut a preset to this many layers, a multiple of 4 (0 = the preset's depth)"),
      integer("seed", int64_t(kDefaultDummySeed), 0, INT64_MAX, P::kOptions,
              "seed of a preset's dummy weights"),
      choice("precision-mode", precision_mode_name(runner.precision_mode), {"strict", "spark"},
             P::kTopLevel,
             "strict keeps checkpoint weight formats; spark converts KDA and shared-expert "
             "weights to NVFP4 and rounds routed-expert activations through NVFP4 (MODEL.md "
             "section 7; --device cpu only) (profile field `precision_mode`)"),
      choice("weight-format", checkpoint_format_name(runner.weight_format), {"bf16", "fp4-local"},
             P::kOptions,
             "checkpoint format of a preset's dummy weights (MODEL.md section 7): fp4-local "
             "keeps routed experts in NVFP4, KDA, dense MLP and LM head in MXFP8, MLA and shared "
             "experts in FP8 block (--device cuda keeps them so on the device; cpu dequantizes); "
             "a --model directory has its own formats"),
      // Capacity and memory.
      integer("max-seq-len", 0, 0, kMaxContext, P::kLimits,
              "longest request, prompt plus output, in tokens (0 = the model's context window)"),
      integer("max-num-seqs", limits.max_num_seqs, 1, 1024, P::kLimits,
              "sequences admitted at once (each holds a KDA state slot)"),
      integer("max-batch-size", 0, 0, 1024, P::kLimits,
              "decode rows per engine step (0 = max-num-seqs)"),
      integer("max-prefill-tokens", limits.max_prefill_tokens, 1, kMaxContext, P::kLimits,
              "prompt tokens prefilled per engine step (the prefill chunk)"),
      bytes("kv-cache-memory-bytes", 0, 0, int64_t(1) << 50, P::kLimits,
            "memory the KV pool is sized from (0 = what gpu-memory-utilization leaves after "
            "weights)"),
      real("gpu-memory-utilization", runner.gpu_memory_utilization, 0.05, 1.0, P::kLimits,
           "fraction of device memory the engine may use, weights and KV pool together"),
      // Engine behaviour.
      integer("block-size", runner.block_size, 1, 256, P::kOptions, "tokens per KV cache block"),
      choice("kv-cache-dtype", "bf16", {"bf16", "fp8_g128"}, P::kOptions,
             "storage of latents and indexer keys (fp8_g128: FP8 with one scale per 128 values)"),
      flag("enable-prefix-caching", false, P::kOptions,
           "reuse the KV blocks and KDA state of a prompt prefix already computed"),
      integer("prefix-cache-snapshots", 16, 1, 4096, P::kOptions,
              "KDA state snapshots the prefix cache keeps beside the state slots (about one per "
              "warm conversation; each is a whole state slot; on CUDA its memory is taken "
              "before the KV pool is sized)"),
      integer("prefix-snapshot-every", 0, 0, 1 << 20, P::kOptions,
              "also snapshot a prefill every this many 64-token chunks (0 = only at prompt ends "
              "and branch points)"),
      integer("prefix-cache-gb", 0, 0, 1 << 20, P::kOptions,
              "size of the prefix cache's disk tier in GiB: blocks and KDA snapshots evicted "
              "from memory are written there and read back when their prefix returns (0 = "
              "none; needs --prefix-cache-dir and --enable-prefix-caching)"),
      text("prefix-cache-dir", "", P::kServerArgs,
           "directory of the prefix cache's disk tier (a disk, not a tmpfs, with "
           "--prefix-cache-gb free; its one file is unlinked at once)"),
      integer("speculative-tokens", limits.speculative_tokens, 0, kMaxSpeculativeTokens,
              P::kOptions,
              "draft tokens the MTP module proposes per sequence and step, all verified in one "
              "forward (0 = off; greedy output is unchanged and sampled output keeps its "
              "distribution, output grammars included; requests with disable_mtp are not "
              "drafted for; one rank only for now)"),
      choice("speculative-rollback", speculative_rollback_name(limits.speculative_rollback),
             {"records", "recompute"}, P::kOptions,
             "how a verify step's rejected drafts are rolled back, both exactly: records keeps "
             "the KDA state after each of the k + 1 rows (k + 1 states per sequence), recompute "
             "keeps the state before them (1 per sequence) and runs the accepted rows again in "
             "the next step"),
      flag("enforce-eager", !runner.cuda_graphs, P::kOptions,
           "launch every CUDA kernel of a decode or speculative verify step eagerly instead of "
           "replaying a captured CUDA graph"),
      flag("profile-steps", runner.profile_steps, P::kServerArgs,
           "time each CUDA step's model parts with device events (graphs included; about a "
           "microsecond an event) and print device time by part at exit; --device cuda only"),
      // Deployment.
      choice("device", "cpu", {"cpu", "cuda"}, P::kServerArgs,
             "backend that runs the forward pass"),
      integer("threads", 0, 0, 1024, P::kServerArgs, "CPU worker threads (0 = one per core)"),
      integer("world-size", 1, 1, 64, P::kServerArgs,
              "processes in the run, one per GPU, each a tensor-parallel rank: 1 or tp-size"),
      integer("rank", 0, 0, 63, P::kCommandLineOnly,
              "this process's rank when each rank is started by hand (several hosts); without "
              "it, rank 0 starts the other ranks on this host"),
      text("master-addr", "127.0.0.1", P::kServerArgs, "address of rank 0 for the rank bootstrap"),
      integer("master-port", 29500, 0, 65535, P::kServerArgs,
              "TCP port of the rank bootstrap (0 = any free port, when rank 0 starts the ranks)"),
      integer("tp-size", 1, 1, 64, P::kServerArgs,
              "tensor-parallel ranks: heads, widths, routed experts and vocabulary split N ways "
              "(docs/parallel.md)"),
      choice("kv-shard", runner.kv_shard ? "on" : "off", {"on", "off"}, P::kOptions,
             "with tp-size N > 1: each rank stores the MLA latents of every N-th position only "
             "(indexer keys stay whole), about 1.66x the KV pool's tokens at N = 2 (N must "
             "divide block-size); off: every rank stores every latent (docs/parallel.md)"),
      text("bind", "127.0.0.1", P::kServerArgs, "address the HTTP server listens on"),
      integer("port", 8893, 0, 65535, P::kServerArgs, "HTTP port (0 = any free port)"),
      text("api-key", "", P::kCommandLineOnly,
           "bearer token every route but /health must present (unset = no authentication)"),
      text("api-key-file", "", P::kCommandLineOnly,
           "file whose first line is the API key (keeps the key out of the process's argv)"),
      text("api-key-env", "", P::kCommandLineOnly,
           "environment variable that holds the API key (keeps the key out of the argv)"),
      real("request-timeout", 0.0, 0.0, kWeek, P::kServerArgs,
           "seconds a request may run before it is cancelled (0 = no limit)"),
      real("header-timeout", 10.0, 0.1, 3600.0, P::kServerArgs,
           "seconds a connection has to send its request headers"),
      real("idle-timeout", 60.0, 0.1, kWeek, P::kServerArgs,
           "seconds an idle keep-alive connection stays open"),
      real("write-timeout", 30.0, 0.1, 3600.0, P::kServerArgs,
           "seconds one write to a client may wait; a client that stops reading is closed"),
      integer("io-threads", 1, 1, 64, P::kServerArgs,
              "threads that run HTTP I/O for all connections (a slow client holds none of them)"),
      real("sse-flush-interval", 0.0, 0.0, 1.0, P::kServerArgs,
           "seconds a running stream gathers events before it writes them (0 = each at once)"),
      bytes("max-body-bytes", 64 * kMiB, 1024, int64_t(1) << 32, P::kServerArgs,
            "largest request body accepted"),
      integer("max-connections", 256, 1, 65536, P::kServerArgs, "open HTTP connections at most"),
      integer("max-messages", 16384, 1, int64_t(1) << 24, P::kServerArgs,
              "chat messages one request may send (more is a 400)"),
      integer("max-tools", 1024, 0, int64_t(1) << 24, P::kServerArgs,
              "tools one chat request may declare (more is a 400)"),
      bytes("max-prompt-bytes", 8 * kMiB, 1, int64_t(1) << 32, P::kServerArgs,
            "bytes of one prompt string or rendered chat, checked before tokenizing"),
      integer("request-workers", 2, 1, 256, P::kServerArgs,
              "threads that read bodies, render chat templates and tokenize, off the I/O threads"),
      integer("request-queue", 64, 0, 65536, P::kServerArgs,
              "requests waiting for a request worker at most; beyond it 503"),
      flag("metrics-without-auth", false, P::kServerArgs,
           "serve /metrics without the API key (for a scraper); every other route but /health "
           "needs it"),
      real("shutdown-grace", 30.0, 0.0, 3600.0, P::kServerArgs,
           "seconds in-flight requests get to finish after SIGTERM (0 = stop at once)"),
      // Test hooks: never in a profile.
      integer("inject-device-fault-after-steps", 0, 0, int64_t(1) << 40, P::kCommandLineOnly,
              "TEST HOOK: provoke a device fault after this many engine steps (a real illegal "
              "address on CUDA, a fatal device error on the CPU) to test the fatal path (0 = off)"),
  };
  for (OptionSpec& s : t) {
    if (s.name == "api-key") s.secret = true;
    if (s.name == "rank") s.per_rank = true;
  }
  return t;
}

}  // namespace

const OptionRegistry& serving_options() {
  static const OptionRegistry registry(serving_table());
  return registry;
}

}  // namespace sparkglm
