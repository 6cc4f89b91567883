// Speculative decoding on either backend: aggregate decode tok/s and acceptance by draft position
// for each --speculative-tokens k, on the same greedy requests, in process (no HTTP). Prompts are
// the held-out examples of a trained tinyGLM (tokens before reply_from), request i taking example
// i; requests end at their stop token or --max-tokens. Prints one JSON object; asserts nothing.
// --rollback records|recompute picks how rejected drafts are rolled back
// (speculative_rollback.h); each cell reports the KDA state records that needs. The runner is
// build_runner's (runner_factory.h), as sparkglm-serve builds it: on cuda with decode and verify
// steps in CUDA graphs unless --enforce-eager.
//
//   speculation_bench --model DIR --prompts DIR/heldout.json --k 0,1,2,3 --concurrency 1,4
//       [--rollback records|recompute] [--device cpu|cuda] [--enforce-eager]
//       [--draft-in-step on|off] [--chain-in-step on|off] [--chain-slices N] [--profile-steps]
//       [--tasks json,tool] [--json-mode] [--waves N] [--outputs FILE]
// with DIR = tinyglm/weights/tinyglm-micro-trained. --draft-in-step off makes the drafter run its
// first MTP forward itself instead of inside the verify step (SchedulerLimits::
// speculative_draft_in_step): the two ways in one run; --chain-in-step off, that the drafter runs
// its later chained passes itself instead of the verify step (speculative_chain_in_step, on the
// runners that chain on the device); --chain-slices N, that verify steps of up to N slices take
// those chains (SchedulerLimits::speculative_chain_slices; the engine's kMaxChainedSlices, 8, by
// default). --profile-steps prints each cell's device
// time by model part to stderr (CudaRunnerOptions::profile_steps; it synchronises every step, so
// its cells' tok/s are not the unprofiled ones). --tasks keeps the held-out examples of those
// tasks only; --json-mode constrains every request to a JSON object, the grammar sparkglm-serve
// compiles for `response_format: {"type": "json_object"}` with the model's tokenizer (structured
// output is drafted for under its grammar: docs/structured-output.md). --waves N runs each
// repetition as N rounds back to back, round w taking examples w*C .. w*C + C - 1 (modulo their
// count), so a C1 cell measures N prompts instead of the first one alone; the JSON states
// `waves` and `prompts` (how many examples were given), and G2's min_prompts judges a speedup
// only where waves x C reaches it. --outputs FILE writes the first cell's replies (its first
// repetition's, one per example it ran, in example order; schema "sparkglm.bench_outputs/1"), so
// the served model's own greedy replies can become training text
// (tinyglm/train/finetune_mtp_onpolicy.py).
//
// Aggregate decode rate = sum(completion - 1) / (last token - first token) (QUALIFICATION.md),
// per repetition (with waves: summed over its rounds, tokens and spans); output_sha256 hashes every
// request's tokens, so equal hashes across k show that speculation changed no output. The JSON
// states its schema ("sparkglm.speculation_bench/1") and the identity a bundle binds (commit,
// clean_tree, binary_sha256, model_dir, weights, config_sha256, reps): `sparkglm-qualify measure
// --speculation-bench FILE` makes it a receipt judged by G2.json's speculation_targets
// (gates/speculation_bundle.h).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/backend/runner_factory.h"
#include "engine/core/build_info.h"
#include "engine/core/cli_args.h"
#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/core/strict_json.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/kda_state_pool.h"
#include "engine/runtime/latent_cache.h"
#include "engine/runtime/serving_engine.h"
#include "engine/runtime/speculation/speculative_rollback.h"
#include "engine/runtime/speculation/speculator.h"
#include "engine/server/token_codec.h"
#include "engine/text/grammar/compiled_grammar.h"

namespace sparkglm {
namespace {

using Clock = std::chrono::steady_clock;

// The held-out examples' prompts, those of `tasks` only when it is not empty.
std::vector<std::vector<int32_t>> load_prompts(const std::string& path,
                                               const std::vector<std::string>& tasks) {
  // A held-out set (tinyglm/train/heldout.py): tens of thousands of token ids, shallow.
  const nlohmann::json j =
      parse_json_file(path, ErrorKind::kInvalidArgument, json_limits::kWorkload);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& e : j.at("examples")) {
    if (!tasks.empty() &&
        std::find(tasks.begin(), tasks.end(), e.at("task").get<std::string>()) == tasks.end())
      continue;
    const auto tokens = e.at("tokens").get<std::vector<int32_t>>();
    const size_t end = e.at("reply_from").get<size_t>();
    if (end == 0 || end > tokens.size())
      throw Error(ErrorKind::kInvalidArgument, "--prompts " + path + ": reply_from outside tokens");
    prompts.emplace_back(tokens.begin(), tokens.begin() + int64_t(end));
  }
  if (prompts.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "--prompts " + path + ": no example" + (tasks.empty() ? "" : " of --tasks"));
  return prompts;
}

// Decode tokens over the span they took, summed over a repetition's rounds.
struct Rate {
  int64_t tokens = 0;
  double seconds = 0;
  double per_second() const { return seconds > 0 ? double(tokens) / seconds : 0.0; }
  Rate& operator+=(const Rate& o) {
    tokens += o.tokens;
    seconds += o.seconds;
    return *this;
  }
};

struct Round {
  Rate rate;  // aggregate decode rate
  // The same from each request's second token: without the first decode step, which with
  // speculation also runs the MTP module over the whole prompt (drafts need its cache there).
  Rate steady_rate;
  int64_t completion_tokens = 0;
  std::vector<std::vector<int32_t>> outputs;
  // Per request, in milliseconds: from its submission to its first token (the prefill step, and
  // with speculation whatever the engine runs for drafts before the first token), from its first
  // token to its second (the first decode step, which with speculation also drafts over the whole
  // prompt), and from its submission to its last token.
  std::vector<double> ttft_ms, first_gap_ms, request_ms;
};

// `concurrency` requests at once, request c taking prompt first + c (modulo the prompt count).
Round run_round(ServingEngine& engine, const std::vector<std::vector<int32_t>>& prompts,
                int concurrency, int max_tokens,
                const std::shared_ptr<const CompiledGrammar>& grammar, int first = 0) {
  std::mutex m;
  std::condition_variable cv;
  std::vector<std::vector<Clock::time_point>> times(static_cast<size_t>(concurrency));
  Round round;
  round.outputs.resize(size_t(concurrency));
  int done = 0;
  std::string failure;  // a request the engine failed: its output and rate would mislead
  const uint64_t finished_before = engine.stats().requests_finished;
  const Clock::time_point submitted = Clock::now();
  for (int c = 0; c < concurrency; ++c) {
    GenerationRequest r;
    r.prompt = prompts[size_t(first + c) % prompts.size()];
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = max_tokens;
    if (grammar) {
      r.constraint.kind = OutputConstraint::Kind::kJsonObject;
      r.grammar = grammar;
    }
    r.on_event = [&, c](const RequestEvent& e) {
      std::lock_guard<std::mutex> lock(m);
      for (const auto& t : e.tokens) {
        times[size_t(c)].push_back(e.time);
        round.outputs[size_t(c)].push_back(t.id);
      }
      if (e.finish == FinishReason::kError || e.finish == FinishReason::kDeviceFault)
        failure = "request " + std::to_string(c) + " failed: " + e.error;
      if (e.finish != FinishReason::kNone && ++done == concurrency) cv.notify_all();
    };
    engine.submit(std::move(r));
  }
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return done == concurrency; });
    if (!failure.empty()) throw std::runtime_error(failure);
  }
  // A request's last event reaches us inside the engine step that ends it, before that step's
  // speculation counters are published: wait for the stats that count every request of the round,
  // so the counters read after this round (and the next round's baseline) hold all its steps.
  while (engine.stats().requests_finished < finished_before + uint64_t(concurrency))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::lock_guard<std::mutex> lock(m);
  auto rate = [&](size_t from) {
    Clock::time_point begin = Clock::time_point::max(), end = Clock::time_point::min();
    Rate r;
    for (const auto& t : times) {
      if (t.size() <= from + 1) continue;
      begin = std::min(begin, t[from]);
      end = std::max(end, t.back());
      r.tokens += int64_t(t.size() - from) - 1;
    }
    if (r.tokens > 0) r.seconds = std::chrono::duration<double>(end - begin).count();
    return r;
  };
  round.rate = rate(0);
  round.steady_rate = rate(1);
  auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  for (const auto& t : times) {
    if (t.empty()) continue;
    round.ttft_ms.push_back(ms(submitted, t[0]));
    round.request_ms.push_back(ms(submitted, t.back()));
    if (t.size() > 1) round.first_gap_ms.push_back(ms(t[0], t[1]));
  }
  for (const auto& t : times) round.completion_tokens += int64_t(t.size());
  return round;
}

// This binary's bytes, hashed: the identity a bundle binds the numbers to (as runner_bench).
std::string self_sha256() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return sha256_hex(bytes.str());
}

// What the runner loaded, as build_runner states it: the same for every cell of a run.
struct LoadedIdentity {
  std::string weights;        // the checkpoint's shard hashes (Checkpoint::identity)
  std::string config_sha256;  // of ModelConfig::to_json().dump(), as sparkglm-serve states it
};

struct BenchSettings {
  std::string device = "cpu";
  std::string model_dir;
  bool cuda_graphs = true;
  SpeculativeRollback rollback = SpeculativeRollback::kRecords;
  bool draft_in_step = true;
  bool chain_in_step = true;
  int chain_slices = kMaxChainedSlices;
  bool profile_steps = false;
  int max_tokens = 128;
  int reps = 3;
  int waves = 1;  // rounds a repetition, each on the next `concurrency` prompts
  std::shared_ptr<const CompiledGrammar> grammar;  // --json-mode: every request's
};

// Each example's reply in a cell's first repetition (empty where no request took the example).
using Replies = std::vector<std::vector<int32_t>>;

nlohmann::json measure(const BenchSettings& s, const ModelConfig& config, ThreadPool& pool,
                       const std::vector<std::vector<int32_t>>& prompts, int k, int concurrency,
                       LoadedIdentity& loaded, Replies& replies) {
  const SpeculativeRollback rollback = s.rollback;
  const int max_tokens = s.max_tokens, reps = s.reps;
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  RunnerRequest o;
  o.device = s.device;
  o.model_dir = s.model_dir;
  o.cuda_graphs = s.cuda_graphs;
  o.profile_steps = s.profile_steps;
  o.max_num_seqs = concurrency;
  o.kv_dtype = KvDtype::kBF16;
  // On the CPU the pool holds the cell's requests and little more. On CUDA a block also holds
  // the indexer's keys, which LatentCache::bytes_per_block does not count (the same bytes would
  // hold fewer blocks there), so the device sizes its pool (--gpu-memory-utilization's default).
  const int blocks = concurrency * int((longest + size_t(max_tokens)) / size_t(o.block_size) + 2);
  if (s.device != "cuda")
    o.kv_cache_bytes =
        size_t(blocks) * LatentCache::bytes_per_block(config, o.block_size, o.kv_dtype);
  o.state_records = speculative_state_records(k, rollback);
  o.decode_slice_rows = speculative_slice_rows(k, rollback);
  SchedulerLimits limits;
  limits.max_num_seqs = limits.max_batch_size = concurrency;
  limits.speculative_tokens = k;
  limits.speculative_rollback = rollback;
  limits.speculative_draft_in_step = s.draft_in_step;
  limits.speculative_chain_in_step = s.chain_in_step;
  limits.speculative_chain_slices = s.chain_slices;
  o.max_tokens_per_step = limits.max_prefill_tokens + concurrency * o.decode_slice_rows;
  BuiltRunner built = build_runner(o, pool);
  loaded = {built.weights_identity, sha256_hex(built.config.to_json().dump())};
  ModelRunner& runner = *built.runner;
  ServingEngine engine(runner, limits);
  run_round(engine, prompts, concurrency, 8, s.grammar);  // warmup
  const EngineStats stats_before = engine.stats();
  const DraftStepTimes times_before = runner.draft_step_times();
  const SpeculationCounters& before = stats_before.speculation;
  std::vector<double> rates, steady, ttft_ms, first_gap_ms, request_ms;
  std::string outputs;
  replies.assign(prompts.size(), {});
  int64_t completion_tokens = 0;
  double wall_seconds = 0;  // of the measured rounds, prefill included
  for (int r = 0; r < reps; ++r) {
    Rate rate, steady_rate;
    completion_tokens = 0;
    for (int w = 0; w < s.waves; ++w) {
      const auto from = Clock::now();
      const Round round =
          run_round(engine, prompts, concurrency, max_tokens, s.grammar, w * concurrency);
      wall_seconds += std::chrono::duration<double>(Clock::now() - from).count();
      rate += round.rate;
      steady_rate += round.steady_rate;
      completion_tokens += round.completion_tokens;
      ttft_ms.insert(ttft_ms.end(), round.ttft_ms.begin(), round.ttft_ms.end());
      first_gap_ms.insert(first_gap_ms.end(), round.first_gap_ms.begin(), round.first_gap_ms.end());
      request_ms.insert(request_ms.end(), round.request_ms.begin(), round.request_ms.end());
      if (r == 0)
        for (size_t c = 0; c < round.outputs.size(); ++c) {
          for (int32_t t : round.outputs[c]) outputs += std::to_string(t) + ",";
          replies[(size_t(w) * size_t(concurrency) + c) % prompts.size()] = round.outputs[c];
        }
    }
    rates.push_back(rate.per_second());
    steady.push_back(steady_rate.per_second());
  }
  const EngineStats stats_after = engine.stats();
  const SpeculationCounters& after = stats_after.speculation;
  nlohmann::json acceptance = nlohmann::json::array();
  for (int i = 0; i < k; ++i) {
    const double drafted = double(after.drafted[size_t(i)] - before.drafted[size_t(i)]);
    const double accepted = double(after.accepted[size_t(i)] - before.accepted[size_t(i)]);
    acceptance.push_back(drafted > 0 ? accepted / drafted : 0.0);
  }
  const double steps = double(after.verify_steps - before.verify_steps);
  // Where an engine step's wall time went, in microseconds per step of the measured rounds
  // (prefill steps included; StepHostTimes): inside the runner's submit (a step whose drafts run
  // inside it waits for the device there), inside its collect (the wait for a pipelined step),
  // in drafting, and the rest (the scheduler's own work, and the engine thread's idle time).
  // Microseconds a step: `seconds` over `count` steps (0 without a step).
  auto per_step = [](double seconds, double count) {
    return count > 0 ? 1e6 * seconds / count : 0.0;
  };
  const double engine_steps = double(stats_after.steps - stats_before.steps);
  auto per_step_us = [&](double seconds) { return per_step(seconds, engine_steps); };
  const double step_us = per_step_us(wall_seconds);
  const double submit_us =
      per_step_us(stats_after.host.submit_seconds - stats_before.host.submit_seconds);
  const double collect_us =
      per_step_us(stats_after.host.collect_seconds - stats_before.host.collect_seconds);
  const double draft_us =
      per_step_us(stats_after.host.draft_seconds - stats_before.host.draft_seconds);
  // The runner's CUDA graphs over the whole cell (warmup included): a verify or MTP shape past
  // the caps runs eagerly, which a cell's tok/s would otherwise hide.
  const StepGraphStats g = runner.graph_stats();
  const nlohmann::json graphs = {
      {"verify_graphs", g.verify_graphs},           {"verify_graph_steps", g.verify_graph_steps},
      {"verify_eager_steps", g.verify_eager_steps}, {"mtp_graphs", g.mtp_graphs},
      {"mtp_graph_steps", g.mtp_graph_steps},       {"mtp_eager_steps", g.mtp_eager_steps}};
  const nlohmann::json step_time = {
      {"steps", engine_steps},  {"step_us", step_us},
      {"submit_us", submit_us}, {"collect_us", collect_us},
      {"draft_us", draft_us},   {"other_us", step_us - submit_us - collect_us - draft_us}};
  // The runner's own split of the steps that brought their drafts back (DraftStepTimes), per such
  // step of the measured rounds. step_us includes prefill; at C1, tokens a step over the decode
  // rate less device_us is the device's idle time a step.
  const DraftStepTimes times = runner.draft_step_times();
  const double draft_steps = double(times.steps - times_before.steps);
  auto per_draft_step_us = [&](double after_s, double before_s) {
    return per_step(after_s - before_s, draft_steps);
  };
  const nlohmann::json draft_step_time = {
      {"steps", draft_steps},
      {"host_us", per_draft_step_us(times.host_seconds, times_before.host_seconds)},
      {"wait_us", per_draft_step_us(times.wait_seconds, times_before.wait_seconds)},
      {"device_us", per_draft_step_us(times.device_seconds, times_before.device_seconds)},
      {"run_us", per_draft_step_us(times.run_seconds, times_before.run_seconds)},
      {"lag_us", per_draft_step_us(times.lag_seconds, times_before.lag_seconds)},
      {"main_us", per_draft_step_us(times.main_seconds, times_before.main_seconds)},
      {"idle_us", per_draft_step_us(times.idle_seconds, times_before.idle_seconds)},
      {"between_us", per_draft_step_us(times.between_seconds, times_before.between_seconds)},
      {"load_us", per_draft_step_us(times.load_seconds, times_before.load_seconds)},
      {"plan_us", per_draft_step_us(times.plan_seconds, times_before.plan_seconds)},
      {"launch_us", per_draft_step_us(times.launch_seconds, times_before.launch_seconds)}};
  // The element n / 2 of the sorted samples (gates/speculation_bench_file.h checks it so).
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  // The rollback's memory: its KDA state records (each one slot's state and conv history).
  const size_t record_bytes = KdaStatePool::snapshot_bytes(config);
  return {{"device", s.device},
          {"k", k},
          {"rollback", speculative_rollback_name(rollback)},
          {"concurrency", concurrency},
          {"state_records_per_sequence", o.state_records},
          {"state_record_bytes", size_t(concurrency) * size_t(o.state_records) * record_bytes},
          {"completion_tokens", completion_tokens},
          {"decode_tok_s", rates},
          {"median_decode_tok_s", median(rates)},
          {"steady_decode_tok_s", steady},
          {"median_steady_decode_tok_s", median(steady)},
          // Medians over every request of the measured rounds (Round): what a client waits.
          {"median_ttft_ms", median(ttft_ms)},
          {"median_first_gap_ms", median(first_gap_ms)},
          {"median_request_ms", median(request_ms)},
          {"acceptance_by_position", acceptance},
          {"tokens_per_verify_step",
           steps > 0 ? double(after.verify_tokens - before.verify_tokens) / steps : 1.0},
          {"replayed_rows_per_verify_step",
           steps > 0 ? double(after.replayed_rows - before.replayed_rows) / steps : 0.0},
          {"draft_in_step", s.draft_in_step},
          {"chain_in_step", s.chain_in_step},
          {"chain_slices", s.chain_slices},
          {"step_chains_per_verify_step",
           steps > 0 ? double(after.step_chains - before.step_chains) / steps : 0.0},
          {"step_drafts_per_verify_step",
           steps > 0 ? double(after.step_drafts - before.step_drafts) / steps : 0.0},
          // Prompts of the measured rounds whose first draft came from their prefill step.
          {"prompt_drafts", after.prompt_drafts - before.prompt_drafts},
          {"engine_step_time", step_time},
          {"draft_step_time", draft_step_time},
          {"graphs", graphs},
          {"output_sha256", sha256_hex(outputs)}};
}

// --outputs: the first cell's replies, in example order, with the cell they came from.
void write_replies(const std::string& path, const nlohmann::json& cell, const BenchSettings& s,
                   const Replies& replies) {
  const nlohmann::json j = {{"schema", "sparkglm.bench_outputs/1"},
                            {"model_dir", s.model_dir},
                            {"device", s.device},
                            {"k", cell.at("k")},
                            {"concurrency", cell.at("concurrency")},
                            {"max_tokens", s.max_tokens},
                            {"output_sha256", cell.at("output_sha256")},
                            {"replies", replies}};
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << j.dump() << "\n";
  if (!f.flush()) throw Error(ErrorKind::kIo, "--outputs " + path + ": cannot write");
}

int run(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "--version") {
    std::fputs(version_text("speculation_bench").c_str(), stdout);
    return 0;
  }
  const CliArgs a(args, {"--enforce-eager", "--profile-steps", "--json-mode"});
  a.allow_only({"--model", "--prompts", "--k", "--concurrency", "--max-tokens", "--reps",
                "--threads", "--rollback", "--device", "--enforce-eager", "--draft-in-step",
                "--chain-in-step", "--chain-slices", "--profile-steps", "--tasks", "--json-mode",
                "--waves", "--outputs"});
  set_default_thread_count(int(a.integer("--threads", 0, 0, 1024)));
  ThreadPool& pool = default_thread_pool();
  BenchSettings s;
  s.model_dir = a.required("--model");
  s.device = a.str("--device", "cpu");
  s.cuda_graphs = !a.has("--enforce-eager");
  s.profile_steps = a.has("--profile-steps");
  const ModelConfig config = ModelConfig::load(s.model_dir + "/config.json");
  std::vector<std::string> tasks;  // --tasks a,b
  for (std::stringstream list(a.str("--tasks", "")); list.good();) {
    std::string task;
    std::getline(list, task, ',');
    if (!task.empty()) tasks.push_back(task);
  }
  const auto prompts = load_prompts(a.required("--prompts"), tasks);
  if (a.has("--json-mode")) {
    OutputConstraint json_object;
    json_object.kind = OutputConstraint::Kind::kJsonObject;
    const auto codec = server::codec_for_model_dir(s.model_dir, config.vocab_size);
    s.grammar = compile_output_constraint(
        json_object, server::grammar_vocabulary(*codec, config.vocab_size, config.eos_token_ids));
  }
  const std::vector<int32_t> ks =
      a.has("--k") ? a.int_list("--k") : std::vector<int32_t>{0, 1, 2, 3};
  const std::vector<int32_t> cs =
      a.has("--concurrency") ? a.int_list("--concurrency") : std::vector<int32_t>{1, 4};
  s.max_tokens = int(a.integer("--max-tokens", 128, 2, 1 << 16));
  s.reps = int(a.integer("--reps", 3, 1, 100));
  s.waves = int(a.integer("--waves", 1, 1, 64));
  s.rollback = speculative_rollback_from_name(a.str("--rollback", "records"), "--rollback");
  auto on_off = [&](const std::string& flag) {
    const std::string v = a.str(flag, "on");
    if (v != "on" && v != "off")
      throw Error(ErrorKind::kInvalidArgument, flag + ": on or off, got '" + v + "'");
    return v == "on";
  };
  s.draft_in_step = on_off("--draft-in-step");
  s.chain_in_step = on_off("--chain-in-step");
  s.chain_slices = int(a.integer("--chain-slices", kMaxChainedSlices, 1, 64));
  const std::string outputs_path = a.str("--outputs", "");
  nlohmann::json cells = nlohmann::json::array();
  LoadedIdentity loaded;
  for (int32_t c : cs)
    for (int32_t k : ks) {
      if (c < 1 || c > 64 || k < 0 || k > kMaxSpeculativeTokens)
        throw Error(ErrorKind::kInvalidArgument, "--k 0..4 and --concurrency 1..64");
      Replies replies;
      cells.push_back(measure(s, config, pool, prompts, k, c, loaded, replies));
      std::cerr << cells.back().dump() << "\n";
      if (!outputs_path.empty() && cells.size() == 1)
        write_replies(outputs_path, cells.back(), s, replies);
    }
  // The identity fields are what `sparkglm-qualify measure --speculation-bench` binds the
  // bundle's candidate to (gates/speculation_bench_file.h).
  const BuildInfo& b = build_info();
  std::cout << nlohmann::json{{"schema", "sparkglm.speculation_bench/1"},
                              {"device", s.device},
                              {"model_dir", s.model_dir},
                              {"weights", loaded.weights},
                              {"config_sha256", loaded.config_sha256},
                              {"cuda_graphs", s.device == "cuda" && s.cuda_graphs},
                              {"profile_steps", s.profile_steps},
                              {"threads", pool.size()},
                              {"max_tokens", s.max_tokens},
                              {"reps", s.reps},
                              {"waves", s.waves},
                              {"prompts", prompts.size()},
                              {"rollback", speculative_rollback_name(s.rollback)},
                              {"tasks", tasks},
                              {"constraint", s.grammar ? "json_object" : "none"},
                              {"cells", cells},
                              {"binary_sha256", self_sha256()},
                              {"commit", b.commit},
                              {"clean_tree", std::string(b.clean_tree) == "true"}}
                   .dump(1)
            << "\n";
  return 0;
}

}  // namespace
}  // namespace sparkglm

int main(int argc, char** argv) {
  try {
    return sparkglm::run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "speculation_bench: %s\n", e.what());
    return 1;
  }
}
