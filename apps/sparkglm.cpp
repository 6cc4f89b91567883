// sparkglm: the operator tool. version, `tinyglm make`, two offline commands on the CPU reference
// backend (`generate`, `logits`) kept for debugging beside the server, and the operator commands
// (operator/commands.h): recipe apply, profile, start, stop, status, logs.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "engine/backend/capacity_plan.h"
#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/core/build_info.h"
#include "engine/core/cli_args.h"
#include "engine/core/error.h"
#include "engine/core/npz_writer.h"
#include "engine/model/config.h"
#include "engine/model/model_loader.h"
#include "engine/model/precision_mode.h"
#include "engine/runtime/latent_cache.h"
#include "engine/runtime/offline_generator.h"
#include "engine/text/byte_tokenizer.h"
#include "operator/commands.h"
#include "tinyglm/checkpoint_quantizer.h"
#include "tinyglm/checkpoint_writer.h"
#include "tinyglm/dummy_tokenizer.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {
namespace {

constexpr const char* kUsage = R"(usage: sparkglm <command> [flags]

  version                              print the build identity (also --version)
  tinyglm make --preset P --out DIR    write a dummy-weight checkpoint directory
       [--weight-format bf16|fp4-local] [--seed N] [--num-layers N] [--shard-mb N] [--force]
  tinyglm tokenizer --preset P --out FILE
       write only the tokenizer.json `tinyglm make` puts beside the checkpoint
  checkpoint quantize --model DIR --out DIR [--weight-format fp4-local] [--shard-mb N] [--force]
       the fp4-local copy of a checkpoint whose projections are BF16 (MODEL.md section 7)
  plan [--gpu h200|gb10 --gpus N]      the memory plan of a preset on N devices (without --gpu:
       1, 2, 4 H200 and 2, 4 GB10) [--preset P] [--weight-format fp4-local|bf16]
       [--num-layers N] [--max-num-seqs N] [--max-prefill-tokens N] [--kv-cache-dtype D]
       [--gpu-memory-utilization F] [--kv-shard on|off]
  generate (--preset P | --model DIR)  greedy generation on the CPU backend
       [--prompt TEXT] [--max-tokens N] [--prefill-chunk N] [--threads N]
  logits (--preset P | --model DIR) --tokens a,b,c --out FILE.npz [--mtp] [--threads N]
       [--kv-cache-dtype f32|bf16|fp8_g128]  logits [T, vocab] and hidden [T, D] of every
       position (and MTP logits [T-1, vocab]); latents in f32 unless the server's dtype is given;
       [--mtp-chain-at P,... [--mtp-chain-depth K]] also the MTP module chained as the drafter
       runs it, from position P on the given tokens: mtp_chain_logits [chains, K-1, vocab]
  With --preset, [--seed N] [--num-layers N] shape the dummy weights; with --model they are
  refused. generate and logits take --precision-mode strict|spark (MODEL.md section 7; default
  strict). A flag a command does not use is an error.

)";

// "\npresets: glm-5.3-flash, tinyglm, ...\n", from the preset table itself.
std::string presets_line() {
  std::string line = "\npresets:";
  for (const std::string& name : preset_names()) line += (line.back() == ':' ? " " : ", ") + name;
  return line + "\n";
}

const std::set<std::string> kModelFlags = {"--preset",     "--model",   "--seed",
                                           "--num-layers", "--threads", "--precision-mode"};

// Where the weights come from. --seed and --num-layers shape a preset's dummy weights; a checkpoint
// directory has its own weights and depth, so with --model they are refused, not ignored.
struct ModelSource {
  std::string preset, model_dir;
  int num_layers = 0;
  uint64_t seed = kDefaultDummySeed;
  PrecisionMode precision = PrecisionMode::kStrict;
};

ModelSource model_source(const CliArgs& a) {
  if (a.has("--model") == a.has("--preset"))
    throw Error(ErrorKind::kInvalidArgument, "give exactly one of --preset NAME or --model DIR");
  ModelSource m;
  m.precision = precision_mode_from_name(a.str("--precision-mode", "strict"));
  if (a.has("--model")) {
    for (const char* flag : {"--num-layers", "--seed"})
      if (a.has(flag))
        throw Error(ErrorKind::kInvalidArgument,
                    std::string(flag) + " applies to --preset only (a --model checkpoint has its " +
                        "own weights and depth)");
    m.model_dir = a.str("--model", "");
    return m;
  }
  m.preset = a.str("--preset", "");
  m.num_layers = int(a.integer("--num-layers", 0, 0, 1024));
  m.seed = uint64_t(a.integer("--seed", int64_t(kDefaultDummySeed), 0, INT64_MAX));
  return m;
}

std::unique_ptr<LoadedModel> load(const ModelSource& m, ThreadPool& pool) {
  auto model = m.model_dir.empty() ? load_model_preset(m.preset, m.num_layers, m.seed, pool)
                                   : load_model_dir(m.model_dir);
  apply_precision_mode(model->config, m.precision, model->weights);
  return model;
}

ThreadPool& pool_for(const CliArgs& a) {
  set_default_thread_count(int(a.integer("--threads", 0, 0, 1024)));
  return default_thread_pool();
}

int cmd_tinyglm_make(const CliArgs& a) {
  std::set<std::string> known = {"--preset",   "--out",   "--seed",    "--num-layers",
                                 "--shard-mb", "--force", "--threads", "--weight-format"};
  a.allow_only(known);
  ThreadPool& pool = pool_for(a);
  ModelConfig config = preset_config(a.required("--preset"));
  if (const int layers = int(a.integer("--num-layers", 0, 0, 1024)); layers > 0)
    config.set_depth(layers);
  CheckpointWriteOptions options;
  options.seed = uint64_t(a.integer("--seed", int64_t(kDefaultDummySeed), 0, INT64_MAX));
  options.max_shard_bytes = a.integer("--shard-mb", 2048, 1, 1 << 20) << 20;
  options.overwrite = a.has("--force");
  options.format = checkpoint_format_from_name(a.str("--weight-format", "bf16"));
  const std::string out = a.required("--out");
  a.reject_unread("sparkglm tinyglm make");
  const int shards = write_dummy_checkpoint(config, out, options, pool);
  std::printf("wrote %s: %d shard(s), weights %s, %s\n", out.c_str(), shards,
              dummy_identity(options.seed).c_str(), checkpoint_format_name(options.format));
  return 0;
}

int cmd_checkpoint_quantize(const CliArgs& a) {
  a.allow_only({"--model", "--out", "--weight-format", "--shard-mb", "--force", "--threads"});
  ThreadPool& pool = pool_for(a);
  CheckpointWriteOptions options;
  options.max_shard_bytes = a.integer("--shard-mb", 2048, 1, 1 << 20) << 20;
  options.overwrite = a.has("--force");
  options.format = checkpoint_format_from_name(a.str("--weight-format", "fp4-local"));
  const std::string model = a.required("--model"), out = a.required("--out");
  a.reject_unread("sparkglm checkpoint quantize");
  const QuantizedCheckpoint q = quantize_checkpoint(model, out, options, pool);
  std::printf("wrote %s: %d shard(s), weights %s\n", out.c_str(), q.shards,
              q.weights_identity.c_str());
  return 0;
}

int cmd_tinyglm_tokenizer(const CliArgs& a) {
  a.allow_only({"--preset", "--out"});
  const ModelConfig config = preset_config(a.required("--preset"));
  const std::string out = a.required("--out");
  a.reject_unread("sparkglm tinyglm tokenizer");
  const std::string text = config.vocab_size == ByteTokenizer::kVocabSize
                               ? ByteTokenizer::hf_tokenizer_json()
                               : dummy_tokenizer_json(config);
  std::ofstream file(out, std::ios::binary);
  file << text;
  if (!file) throw Error(ErrorKind::kIo, "failed writing " + out);
  std::printf("wrote %s (%d ids)\n", out.c_str(), config.vocab_size);
  return 0;
}

void print_plan(const ModelConfig& config, const CapacityRequest& r) {
  const CapacityPlan p = plan_capacity(config, r);
  std::printf("%d x %s (%s%s): weights %s, state slots %s, workspace %s, reserve %s a device\n",
              r.devices, r.device.name.c_str(), gib_text(r.device.memory).c_str(),
              r.device.shared_with_host ? " shared with the host" : "",
              gib_text(p.demand.weights).c_str(), gib_text(p.demand.state).c_str(),
              gib_text(p.demand.workspace).c_str(), gib_text(p.demand.reserve).c_str());
  if (p.fits) {
    std::printf("  KV pool %s: %lld tokens (%zu bytes a token on each device",
                gib_text(p.pool.kv_budget).c_str(), static_cast<long long>(p.kv_tokens),
                p.demand.per_block / size_t(r.block_size));
    if (p.kv_shard_gain > 1.0)
      std::printf("; KV shard: latents split %d ways, %.2fx the tokens of a replicated cache",
                  r.devices, p.kv_shard_gain);
    std::printf(")\n");
    return;
  }
  const int depth = deepest_fitting_depth(config, r);
  std::printf("  does not fit: %s\n  deepest depth that fits: %d of %d layers\n", p.why_not.c_str(),
              depth, config.num_hidden_layers);
}

int cmd_plan(const CliArgs& a) {
  a.allow_only({"--preset", "--weight-format", "--gpu", "--gpus", "--num-layers", "--max-num-seqs",
                "--max-prefill-tokens", "--kv-cache-dtype", "--gpu-memory-utilization",
                "--kv-shard"});
  const std::string preset = a.str("--preset", "glm-5.3-flash");
  ModelConfig config = preset_config(preset);
  if (const int layers = int(a.integer("--num-layers", 0, 0, 1024)); layers > 0)
    config.set_depth(layers);
  CapacityRequest r;
  r.format = checkpoint_format_from_name(a.str("--weight-format", "fp4-local"));
  r.max_num_seqs = int(a.integer("--max-num-seqs", r.max_num_seqs, 1, 1024));
  r.max_tokens_per_step = a.integer("--max-prefill-tokens", r.max_tokens_per_step, 1, 1 << 24);
  r.kv_dtype = kv_dtype_from_string(a.str("--kv-cache-dtype", "fp8_g128"));
  const std::string shard = a.str("--kv-shard", "on");
  if (shard != "on" && shard != "off")
    throw Error(ErrorKind::kInvalidArgument, "--kv-shard " + shard + ": expected on or off");
  r.kv_shard = shard == "on";
  const std::string share = a.str("--gpu-memory-utilization", "0.9");
  char* end = nullptr;
  r.gpu_memory_utilization = std::strtod(share.c_str(), &end);
  if (*end != '\0' || !(r.gpu_memory_utilization >= 0.05 && r.gpu_memory_utilization <= 1.0))
    throw Error(ErrorKind::kInvalidArgument,
                "--gpu-memory-utilization " + share + ": expected a number in [0.05, 1]");
  if (a.has("--gpu") != a.has("--gpus"))
    throw Error(ErrorKind::kInvalidArgument, "give both --gpu and --gpus, or neither");
  std::vector<std::pair<std::string, int>> setups = {
      {"h200", 1}, {"h200", 2}, {"h200", 4}, {"gb10", 2}, {"gb10", 4}};
  if (a.has("--gpu")) setups = {{a.str("--gpu", ""), int(a.integer("--gpus", 1, 1, 64))}};
  a.reject_unread("sparkglm plan");
  std::printf(
      "%s, %d layers, %s: %s of weights in all; %d state slots, %lld rows a step, %s KV%s, "
      "--gpu-memory-utilization %g\n",
      preset.c_str(), config.num_hidden_layers, checkpoint_format_name(r.format),
      gib_text(size_t(plan_capacity(config, r).model_bytes)).c_str(), r.max_num_seqs,
      static_cast<long long>(r.max_tokens_per_step), to_string(r.kv_dtype),
      r.kv_shard ? " (KV shard on)" : " (KV shard off)", r.gpu_memory_utilization);
  for (const auto& [gpu, n] : setups) {
    r.device = device_kind(gpu);
    r.devices = n;
    print_plan(config, r);
  }
  return 0;
}

int cmd_generate(const CliArgs& a) {
  std::set<std::string> known = kModelFlags;
  known.insert({"--prompt", "--max-tokens", "--prefill-chunk"});
  a.allow_only(known);
  const ModelSource source = model_source(a);
  const std::string prompt =
      a.str("--prompt", "[gMASK]<sop><|user|>\nWrite a haiku about sparks.<|assistant|>");
  const int max_tokens = int(a.integer("--max-tokens", 32, 1, 1 << 20));
  const int chunk = int(a.integer("--prefill-chunk", 512, 1, 1 << 20));
  ThreadPool& pool = pool_for(a);
  a.reject_unread("sparkglm generate");
  const auto model = load(source, pool);
  const ByteTokenizer tok;
  const std::vector<int32_t> ids = tok.encode(prompt);
  const int block_size = 16;
  const int blocks = int((ids.size() + size_t(max_tokens)) / block_size + 2);
  cpu::CpuModelRunner runner(model->config, model->weights, {blocks, block_size, 1}, pool);
  BlockAllocator allocator(blocks);
  OfflineGenerator gen(runner, allocator, block_size, chunk);
  const GenerationResult r = gen.generate_greedy(ids, max_tokens, /*stop_at_eos=*/false);
  // Dummy weights produce noise: print it escaped so control bytes cannot garble the terminal.
  std::string shown;
  for (unsigned char ch : tok.decode(r.tokens)) {
    if (ch >= 0x20 && ch < 0x7f) {
      shown += char(ch);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      shown += buf;
    }
  }
  std::cout << shown << "\n";
  std::fprintf(stderr,
               "model %s, %d threads: prompt %zu tokens in %.3f s (%.1f tok/s); %zu generated, "
               "decode %.1f tok/s\n",
               model->name.c_str(), pool.size(), ids.size(), r.prefill_seconds,
               double(ids.size()) / r.prefill_seconds, r.tokens.size(),
               r.tokens.size() > 1 ? double(r.tokens.size() - 1) / r.decode_seconds : 0.0);
  return 0;
}

int cmd_logits(const CliArgs& a) {
  // One forward over all the tokens: no prefill chunking, so --prefill-chunk is unknown here.
  std::set<std::string> known = kModelFlags;
  known.insert(
      {"--tokens", "--out", "--mtp", "--mtp-chain-at", "--mtp-chain-depth", "--kv-cache-dtype"});
  a.allow_only(known);
  const ModelSource source = model_source(a);
  const std::vector<int32_t> ids = a.int_list("--tokens");
  const std::string out_path = a.required("--out");
  const bool with_mtp = a.has("--mtp");
  const std::vector<int32_t> chain_at =
      a.has("--mtp-chain-at") ? a.int_list("--mtp-chain-at") : std::vector<int32_t>{};
  const int depth = int(a.integer("--mtp-chain-depth", 2, 2, 8));
  if (chain_at.size() > 64)
    throw Error(ErrorKind::kInvalidArgument, "--mtp-chain-at: at most 64 positions");
  for (const int32_t p : chain_at)
    if (p < 1 || int64_t(p) + depth > int64_t(ids.size()))
      throw Error(ErrorKind::kInvalidArgument,
                  "--mtp-chain-at " + std::to_string(p) + ": a chain of depth " +
                      std::to_string(depth) + " needs 1 <= P and P + depth <= the token count " +
                      std::to_string(ids.size()));
  cpu::CpuRunnerOptions options;
  options.kv_dtype = kv_dtype_from_string(a.str("--kv-cache-dtype", "f32"));
  ThreadPool& pool = pool_for(a);
  a.reject_unread("sparkglm logits");
  const auto model = load(source, pool);
  if (!chain_at.empty() && model->config.mtp_layer() < 0)
    throw Error(ErrorKind::kInvalidArgument, "--mtp-chain-at: the model has no MTP module");
  const int64_t t = int64_t(ids.size()), d = model->config.hidden_size,
                v = model->config.vocab_size;
  const int block_size = 16, blocks = int(t / block_size + 2);
  options.num_blocks = blocks;
  options.block_size = block_size;
  options.num_state_slots = 1;
  cpu::CpuModelRunner runner(model->config, model->weights, options, pool);
  BlockAllocator allocator(blocks);
  std::vector<int32_t> table;
  allocator.ensure_capacity(table, t, block_size);
  ForwardBatch batch;
  batch.add_sequence(ids, 0, 0, table, true, /*all_logits=*/true);
  ForwardOutput main;
  runner.forward(batch, main);
  std::vector<NpzArray> arrays = {{"logits", {t, v}, main.logits.data()},
                                  {"hidden", {t, d}, main.hidden.data()}};
  ForwardOutput mtp;
  if (with_mtp && t > 1) {
    // MTP row i combines h_i with token i+1.
    ForwardBatch mb;
    mb.add_sequence({ids.begin() + 1, ids.end()}, 0, 0, table, true, /*all_logits=*/true);
    std::vector<float> hidden(main.hidden.begin(), main.hidden.end() - d);
    runner.forward_mtp(mb, hidden, mtp);
    arrays.push_back({"mtp_logits", {t - 1, v}, mtp.logits.data()});
  }
  // Chains as the MTP drafter runs them (engine/runtime/speculation/mtp_drafter.h), on the given
  // tokens instead of drafts: pass 1 over positions 0..P-1, then pass d (2..depth) one row at
  // position P + d - 2 on token P + d - 1 and pass d - 1's output state.
  std::vector<float> chain;  // [chains, depth - 1, vocab]
  for (const int32_t p : chain_at) {
    ForwardBatch first;
    first.add_sequence({ids.begin() + 1, ids.begin() + 1 + p}, 0, 0, table, true);
    first.seqs.back().decode = false;
    ForwardOutput step;
    runner.forward_mtp(first, {main.hidden.begin(), main.hidden.begin() + p * d}, step);
    for (int pass = 2; pass <= depth; ++pass) {
      ForwardBatch next;
      next.add_sequence({ids[size_t(p + pass - 1)]}, p + pass - 2, 0, table);
      ForwardOutput out;
      runner.forward_mtp(next, step.hidden, out);
      chain.insert(chain.end(), out.logits.begin(), out.logits.begin() + v);
      step = std::move(out);
    }
  }
  if (!chain_at.empty())
    arrays.push_back({"mtp_chain_logits", {int64_t(chain_at.size()), depth - 1, v}, chain.data()});
  write_npz(out_path, arrays);
  std::printf("wrote %s (%lld positions)\n", out_path.c_str(), static_cast<long long>(t));
  return 0;
}

int run(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "help") {
    std::FILE* out = args.empty() ? stderr : stdout;
    std::fputs(kUsage, out);
    std::fputs(operator_tool::kOperatorUsage, out);
    std::fputs(presets_line().c_str(), out);
    return args.empty() ? 2 : 0;
  }
  const std::string& cmd = args[0];
  if (cmd == "--version" || cmd == "version") {
    std::fputs(version_text("sparkglm").c_str(), stdout);
    return 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (cmd == "recipe") return operator_tool::recipe_command(rest);
  if (cmd == "profile") return operator_tool::profile_command(rest);
  if (cmd == "start" || cmd == "stop" || cmd == "status" || cmd == "logs")
    return operator_tool::engine_command(cmd, rest);
  const std::set<std::string> switches = {"--force", "--mtp"};
  if (cmd == "tinyglm") {
    if (args.size() < 2 || (args[1] != "make" && args[1] != "tokenizer"))
      throw Error(ErrorKind::kInvalidArgument,
                  "expected `sparkglm tinyglm make ...` or `sparkglm tinyglm tokenizer ...`");
    const CliArgs rest_flags({args.begin() + 2, args.end()}, switches);
    return args[1] == "make" ? cmd_tinyglm_make(rest_flags) : cmd_tinyglm_tokenizer(rest_flags);
  }
  if (cmd == "checkpoint") {
    if (args.size() < 2 || args[1] != "quantize")
      throw Error(ErrorKind::kInvalidArgument, "expected `sparkglm checkpoint quantize ...`");
    return cmd_checkpoint_quantize(CliArgs({args.begin() + 2, args.end()}, switches));
  }
  const CliArgs flags({args.begin() + 1, args.end()}, switches);
  if (cmd == "plan") return cmd_plan(flags);
  if (cmd == "generate") return cmd_generate(flags);
  if (cmd == "logits") return cmd_logits(flags);
  throw Error(ErrorKind::kInvalidArgument, "unknown command \"" + cmd + "\" (see sparkglm --help)");
}

}  // namespace
}  // namespace sparkglm

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> args(argv + 1, argv + argc);
    sparkglm::refuse_non_utf8_arguments(args);
    return sparkglm::run(args);
  } catch (const sparkglm::Error& e) {
    std::fprintf(stderr, "sparkglm: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparkglm: %s\n", e.what());
    return 1;
  }
}
