// In-process serving throughput: the same greedy requests that bench/serve_bench.py sends through
// HTTP, submitted straight to the ServingEngine. The ratio of the two is the server's overhead.
// Prints one JSON object; asserts nothing.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>

#include <nlohmann/json.hpp>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/core/build_info.h"
#include "engine/core/cli_args.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/serving_engine.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {
namespace {

using Clock = std::chrono::steady_clock;

struct Stream {
  std::vector<Clock::time_point> token_times;
  bool done = false;
};

// Aggregate decode rate of `concurrency` simultaneous requests: sum(completion - 1) / (last
// token - first token), the definition of QUALIFICATION.md.
// Also reports, through wall_rate, generated tokens / (all finished - submission): the measure a
// client that only waits for the streams to end (curl) can compare against.
double run_round(ServingEngine& engine, int concurrency, int prompt_len, int max_tokens,
                 double* wall_rate = nullptr) {
  const auto submitted = Clock::now();
  std::mutex m;
  std::condition_variable cv;
  std::vector<Stream> streams(static_cast<size_t>(concurrency));
  for (int c = 0; c < concurrency; ++c) {
    GenerationRequest r;
    for (int i = 0; i < prompt_len; ++i) r.prompt.push_back((i * 7 + c * 13 + 1) % 256);
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = true;
    r.on_event = [&, c](const RequestEvent& e) {
      std::lock_guard<std::mutex> lock(m);
      for (size_t i = 0; i < e.tokens.size(); ++i) streams[size_t(c)].token_times.push_back(e.time);
      if (e.finish != FinishReason::kNone) {
        streams[size_t(c)].done = true;
        cv.notify_all();
      }
    };
    engine.submit(std::move(r));
  }
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, [&] {
    for (const auto& s : streams)
      if (!s.done) return false;
    return true;
  });
  Clock::time_point first = Clock::time_point::max(), last = Clock::time_point::min();
  int64_t tokens = 0, generated = 0;
  for (const auto& s : streams) {
    first = std::min(first, s.token_times.front());
    last = std::max(last, s.token_times.back());
    tokens += int64_t(s.token_times.size()) - 1;
    generated += int64_t(s.token_times.size());
  }
  if (wall_rate)
    *wall_rate =
        double(generated) / std::chrono::duration<double>(Clock::now() - submitted).count();
  return double(tokens) / std::chrono::duration<double>(last - first).count();
}

int run(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "--version") {
    std::fputs(version_text("engine_bench").c_str(), stdout);
    return 0;
  }
  const CliArgs a(args, {});
  a.allow_only(
      {"--preset", "--concurrency", "--prompt-tokens", "--max-tokens", "--reps", "--threads"});
  set_default_thread_count(int(a.integer("--threads", 0, 0, 1024)));
  ThreadPool& pool = default_thread_pool();
  const auto model =
      load_model_preset(a.str("--preset", "tinyglm-micro"), 0, kDefaultDummySeed, pool);
  const int prompt_len = int(a.integer("--prompt-tokens", 64, 1, 1 << 20));
  const int max_tokens = int(a.integer("--max-tokens", 256, 2, 1 << 20));
  const int reps = int(a.integer("--reps", 3, 1, 100));
  // --concurrency C measures C alone, so that serve_bench.py can interleave in-process and HTTP
  // rounds on a machine whose load drifts.
  std::vector<std::string> levels = {"1", "4", "8"};
  if (a.has("--concurrency")) levels = {std::to_string(a.integer("--concurrency", 1, 1, 64))};
  nlohmann::json out = nlohmann::json::object(), wall_out = nlohmann::json::object();
  for (const std::string& cs : levels) {
    const int c = std::stoi(cs);
    const int blocks = c * ((prompt_len + max_tokens) / 16 + 2);
    cpu::CpuModelRunner runner(model->config, model->weights,
                               {blocks, 16, c, cpu::KdaPath::kAuto, KvDtype::kBF16}, pool);
    SchedulerLimits limits;
    limits.max_num_seqs = c;
    limits.max_batch_size = c;
    ServingEngine engine(runner, limits);
    run_round(engine, c, prompt_len, 8);  // warmup
    std::vector<double> rates, walls;
    for (int r = 0; r < reps; ++r) {
      double wall = 0;
      rates.push_back(run_round(engine, c, prompt_len, max_tokens, &wall));
      walls.push_back(wall);
    }
    out[cs] = rates;
    wall_out[cs] = walls;
  }
  std::cout << nlohmann::json{{"in_process_aggregate_decode_tok_s", out},
                              {"in_process_wall_tok_s", wall_out}}
                   .dump()
            << "\n";
  return 0;
}

}  // namespace
}  // namespace sparkglm

int main(int argc, char** argv) {
  try {
    return sparkglm::run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine_bench: %s\n", e.what());
    return 1;
  }
}
