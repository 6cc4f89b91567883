#pragma once
// The tokens each sparse query attended, by MLA layer: a diagnostic with which a test compares two
// runners' indexer choices row by row (cpu::CpuRunnerOptions and cuda::CudaRunnerOptions
// ::selection_trace, null by default). Where two runners' logits part, it tells a near-tied pool
// that one of them chose differently from a kernel that computes a row wrong under the same choice.
// Only tests set one: no flag or profile reaches it. A CUDA runner with a trace runs every step
// eagerly and waits for each sparse pass's selection, so it is for tests only.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace sparkglm {

class SelectionTrace {
 public:
  // The row of KDA state slot `slot` at `position` attended tokens[0 .. count) in MLA cache layer
  // `layer` (a later record of the same row replaces it). Safe from several threads. (No std::span:
  // the CUDA sources that record are C++17.)
  void record(int layer, int slot, int32_t position, const int32_t* tokens, size_t count);
  // That row's attended tokens in increasing order; empty when it was not recorded (a dense row).
  std::vector<int32_t> tokens(int layer, int slot, int32_t position) const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::tuple<int, int, int32_t>, std::vector<int32_t>> rows_;
};

}  // namespace sparkglm
