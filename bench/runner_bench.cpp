// sparkglm-runner-bench: decode tok/s at C rows and cold prefill tok/s at L tokens, straight
// through a ModelRunner built by build_runner (the same engine sparkglm-serve runs), each beside
// its floor (verify_cC_wW cells: a speculative verify step beside a decode step instead): bytes a
// decode step must read over measured bandwidth, FLOPs of a prefill over measured (cuda) or
// estimated (cpu) peak (engine/model/step_footprint.h). Writes one JSON file
// ("sparkglm.runner_bench/1") that `sparkglm-qualify measure` turns into a bundle; asserts nothing.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/runner/ceilings.h"
#include "bench/runner/engine_cells.h"
#include "engine/backend/runner_factory.h"
#include "engine/core/build_info.h"
#include "engine/core/cli_args.h"
#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/core/strict_json.h"
#include "engine/model/precision_mode.h"
#include "engine/model/step_footprint.h"
#include "engine/server/token_codec.h"
#include "engine/text/grammar/compiled_grammar.h"
#include "engine/text/output_constraint.h"

namespace sparkglm {
namespace {

using bench::CellSettings;
using bench::CellSpec;
using nlohmann::json;

std::string self_sha256() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return sha256_hex(bytes.str());
}

// The floor beside a measured cell: decode from bytes, prefill from FLOPs.
// The weights' bytes are those of the checkpoint format they are read in.
void add_floor(json& j, const CellSpec& cell, const ModelConfig& config, KvDtype kv,
               CheckpointFormat format, const bench::Ceilings& c) {
  if (cell.decode) {
    const DecodeStepBytes b =
        decode_step_bytes(config, cell.rows, j["floor_context"].get<int64_t>(), kv, format);
    j["floor_bytes"] = b.total();
    j["floor_parts"] = {{"weights", b.weights}, {"kda_state", b.kda_state}, {"latent", b.latent}};
    j["floor_ms"] = double(b.total()) / (c.bandwidth_gbps * 1e9) * 1e3;
  } else {
    const PrefillFlops f = prefill_flops(config, cell.tokens);
    j["floor_flops"] = f.total();
    j["floor_parts"] = {{"projections", f.projections}, {"mla", f.mla}, {"kda", f.kda}};
    j["floor_ms"] = double(f.total()) / (c.peak_tflops * 1e12) * 1e3;
  }
  j["fraction_of_floor"] = j["floor_ms"].get<double>() / j["median_ms"].get<double>();
}

// --temperature: a decimal in [0, 2]; decode cells also time seeded sampling at it
// (engine_cells.h).
float parse_temperature(const std::string& text) {
  size_t used = 0;
  double v = -1;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(v >= 0 && v <= 2))
    throw Error(ErrorKind::kInvalidArgument,
                "--temperature: expected a number in [0, 2], got \"" + text + "\"");
  return float(v);
}

int run(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "--version") {
    std::fputs(version_text("sparkglm-runner-bench").c_str(), stdout);
    return 0;
  }
  const CliArgs a(args, {"--profile-steps", "--enforce-eager"});
  a.allow_only({"--device",        "--preset",         "--num-layers",
                "--seed",          "--weight-format",  "--precision-mode",
                "--block-size",    "--kv-cache-dtype", "--gpu-memory-utilization",
                "--cells",         "--prompt",         "--decode-steps",
                "--warmup-steps",  "--runs",           "--max-prefill-tokens",
                "--max-seconds",   "--threads",        "--out",
                "--profile-steps", "--enforce-eager",  "--temperature",
                "--schema"});
  const std::string out_path = a.required("--out");
  set_default_thread_count(int(a.integer("--threads", 0, 0, 1024)));
  ThreadPool& pool = default_thread_pool();

  CellSettings s;
  s.prompt = int(a.integer("--prompt", 128, 1, 1 << 20));
  s.decode_steps = int(a.integer("--decode-steps", 64, 3, 1 << 20));
  s.warmup_steps = int(a.integer("--warmup-steps", 4, 0, 1 << 20));
  s.runs = int(a.integer("--runs", 3, 1, 1000));
  s.max_prefill_tokens = int(a.integer("--max-prefill-tokens", 8192, 1, 1 << 20));
  s.max_seconds = double(a.integer("--max-seconds", 600, 1, 1 << 20));
  s.temperature = parse_temperature(a.str("--temperature", "0"));
  std::vector<CellSpec> cells;
  std::stringstream names(
      a.str("--cells", "decode_c1,decode_c4,decode_c8,prefill_8k,prefill_32k,prefill_64k"));
  for (std::string n; std::getline(names, n, ',');) cells.push_back(bench::parse_cell(n));
  const std::string schema_path = a.str("--schema", "");
  for (const CellSpec& c : cells)
    if (c.constrained && schema_path.empty())
      throw Error(ErrorKind::kInvalidArgument,
                  "--cells " + c.name + ": a _schema cell needs --schema FILE (a JSON Schema)");

  RunnerRequest r;
  r.device = a.str("--device", "cpu");
  if (r.device != "cpu" && r.device != "cuda")
    throw Error(ErrorKind::kInvalidArgument,
                "--device: expected cpu or cuda, got \"" + r.device + "\"");
  r.preset = a.required("--preset");
  r.num_layers = int(a.integer("--num-layers", 0, 0, 1 << 10));
  r.seed = uint64_t(a.integer("--seed", 0, 0, INT64_MAX));
  r.weight_format = checkpoint_format_from_name(a.str("--weight-format", "bf16"));
  r.precision_mode = precision_mode_from_name(a.str("--precision-mode", "strict"));
  r.block_size = int(a.integer("--block-size", 16, 1, 1 << 12));
  r.profile_steps = a.has("--profile-steps");  // device time by part on stderr at exit (cuda)
  // No step graphs at all (cuda), as sparkglm-serve --enforce-eager; verify cells time their
  // eager verify steps beside the graphed ones without it.
  r.cuda_graphs = !a.has("--enforce-eager");
  const std::string kv_name = a.str("--kv-cache-dtype", "bf16");
  if (kv_name != "bf16" && kv_name != "fp8_g128")
    throw Error(ErrorKind::kInvalidArgument,
                "--kv-cache-dtype: expected bf16 or fp8_g128, got \"" + kv_name + "\"");
  r.kv_dtype = kv_dtype_from_string(kv_name);
  const std::string util = a.str("--gpu-memory-utilization", "0.9");
  try {
    size_t used = 0;
    r.gpu_memory_utilization = std::stod(util, &used);
    if (used != util.size()) r.gpu_memory_utilization = -1;
  } catch (const std::exception&) {
    r.gpu_memory_utilization = -1;
  }
  if (!(r.gpu_memory_utilization > 0 && r.gpu_memory_utilization <= 1))
    throw Error(ErrorKind::kInvalidArgument,
                "--gpu-memory-utilization: expected a number in (0, 1], got \"" + util + "\"");
  int64_t longest = 1;
  for (const CellSpec& c : cells) {
    r.max_num_seqs = std::max(r.max_num_seqs, bench::sequences(c));
    longest = std::max<int64_t>(longest, bench::blocks_needed(c, s, 1) / bench::sequences(c));
  }
  r.max_seq_len = int(longest);
  // Verify cells: W state records per slot and decode slices of W rows (the widest cell's).
  for (const CellSpec& c : cells) {
    r.state_records = std::max(r.state_records, c.width);
    r.decode_slice_rows = std::max(r.decode_slice_rows, c.width);
  }
  r.max_tokens_per_step = std::max(s.max_prefill_tokens, r.max_num_seqs * r.decode_slice_rows);

  // Ceilings before the runner: on cuda the probe needs memory the caches will take.
  const bench::Ceilings ceilings = bench::measure_ceilings(r.device, pool);
  std::fprintf(stderr, "bandwidth %.1f GB/s, peak %.2f TFLOP/s\n", ceilings.bandwidth_gbps,
               ceilings.peak_tflops);
  BuiltRunner built = build_runner(r, pool);
  for (const std::string& line : built.log_lines) std::fprintf(stderr, "%s\n", line.c_str());
  BlockAllocator blocks(built.runner->cache_geometry().num_blocks);
  if (!schema_path.empty()) {
    // Compiled as the server compiles a request's json_schema, against the model's vocabulary.
    OutputConstraint constraint;
    constraint.kind = OutputConstraint::Kind::kJsonSchema;
    constraint.schema =
        parse_json_file(schema_path, ErrorKind::kInvalidArgument, json_limits::kWorkload);
    const auto codec = server::codec_for_model(r.model_dir, r.preset, built.config);
    const std::vector<int32_t> eos(built.config.eos_token_ids.begin(),
                                   built.config.eos_token_ids.end());
    s.grammar = compile_output_constraint(
        constraint, server::grammar_vocabulary(*codec, built.config.vocab_size, eos));
    s.schema_sha256 = sha256_hex(constraint.schema.dump());
  }

  json results = json::array();
  for (const CellSpec& c : cells) {
    json j = bench::run_cell(*built.runner, blocks, c, s);
    // A verify cell is measured against its decode steps, not a floor.
    if (!j.contains("skipped") && c.width == 0)
      add_floor(j, c, built.config, r.kv_dtype, r.weight_format, ceilings);
    json row = {{"cell", c.name}};
    row.update(j);
    std::fprintf(stderr, "%s\n", row.dump().substr(0, 400).c_str());
    results.push_back(row);
  }
  const BuildInfo& b = build_info();
  const json doc = {
      {"schema", "sparkglm.runner_bench/1"},
      {"device", r.device},
      {"preset", built.model_id},
      {"num_layers", built.config.num_hidden_layers},
      {"config_sha256", sha256_hex(built.config.to_json().dump())},
      {"weights", built.weights_identity},
      {"precision_mode", precision_mode_name(r.precision_mode)},
      {"kv_cache_dtype", kv_name},
      {"block_size", r.block_size},
      {"pool_tokens", built.pool_tokens},
      {"threads", pool.size()},
      {"bandwidth_gbps", ceilings.bandwidth_gbps},
      {"bandwidth_method", ceilings.bandwidth_method},
      {"peak_tflops", ceilings.peak_tflops},
      {"peak_method", ceilings.peak_method},
      {"settings",
       {{"prompt", s.prompt},
        {"decode_steps", s.decode_steps},
        {"warmup_steps", s.warmup_steps},
        {"runs", s.runs},
        {"max_prefill_tokens", s.max_prefill_tokens},
        {"max_seconds", s.max_seconds},
        {"temperature", s.temperature},
        {"schema", schema_path},
        {"enforce_eager", !r.cuda_graphs}}},
      {"method",
       "decode: median of per-step forward wall times (steady clock) after warmups, tok/s = rows "
       "/ median; prefill: cold sequence timed end to end, tok/s = tokens / median; floors in "
       "engine/model/step_footprint.h; _schema cells: constrained_cell.h"},
      {"cells", results},
      {"binary_sha256", self_sha256()},
      {"commit", b.commit},
      {"clean_tree", std::string(b.clean_tree) == "true"}};
  std::ofstream out(out_path);
  out << doc.dump(2) << '\n';
  if (!out) throw Error(ErrorKind::kIo, "cannot write " + out_path);
  return 0;
}

}  // namespace
}  // namespace sparkglm

int main(int argc, char** argv) {
  try {
    return sparkglm::run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparkglm-runner-bench: %s\n", e.what());
    return 2;
  }
}
