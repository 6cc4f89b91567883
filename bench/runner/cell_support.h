#pragma once
// What the runner bench's cells share: the clock, medians, the text-like prompts, the block
// tables a cell holds (returned on every path out), and the untimed prefill of a decode cell.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/model_runner.h"
#include "engine/runtime/block_allocator.h"

namespace sparkglm::bench {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0);
double median(std::vector<double> v);

// Text-like token ids, different per sequence so that rows route to different experts.
std::vector<int32_t> prompt_of(int64_t n, int seq, int vocab);

// {"skipped": why}: a cell that did not run, and why.
nlohmann::json skipped(const std::string& why);

// {"tokens_per_s": rows / median, "median_ms", "runs", "samples_ms"} of per-step times.
nlohmann::json step_stats(const std::vector<double>& ms, int rows);

// Returns a table's blocks to the allocator on every path out of a cell.
struct Tables {
  BlockAllocator& blocks;
  std::vector<std::vector<int32_t>> tables;
  Tables(BlockAllocator& b, int n) : blocks(b), tables(size_t(n)) {}
  ~Tables() {
    for (auto& t : tables) blocks.release_all(t);
  }
  Tables(const Tables&) = delete;
  Tables& operator=(const Tables&) = delete;
};

// Prefills sequence q of `t` (state slot q) with prompt_of(context, q), one sequence at a time in
// chunks of `chunk` tokens, untimed; returns each sequence's last logit row [rows][vocab].
std::vector<std::vector<float>> prefill_rows(ModelRunner& runner, Tables& t, int64_t context,
                                             int chunk);

}  // namespace sparkglm::bench
