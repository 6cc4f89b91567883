#pragma once
// Where a negative control (engine/model/engine_fault.h) reaches a runner's output, for any
// ModelRunner: every row's logits of one prefill, and which rows differ between two of them.
// The CPU and CUDA engine-fault tests (tests/gates/quality_gate_test.cpp,
// tests/cuda/quality_gate_cuda_test.cpp) compare an intact runner with a faulted one this way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/model/forward_batch.h"
#include "engine/model/model_runner.h"

namespace sparkglm::fault_reach {

// Every row's logits [n, vocab] of one prefill of tokens[0, n): one chunk, slot 0, blocks 0, 1,
// ... of `block_size` tokens (a fresh cache).
inline std::vector<float> prefill_logits(ModelRunner& runner, const std::vector<int32_t>& tokens,
                                         int n, int block_size) {
  EXPECT_GE(int(tokens.size()), n);
  n = std::min(n, int(tokens.size()));
  std::vector<int32_t> table(size_t((n + block_size - 1) / block_size));
  for (size_t b = 0; b < table.size(); ++b) table[b] = int32_t(b);
  ForwardBatch batch;
  batch.add_sequence({tokens.begin(), tokens.begin() + n}, 0, 0, table, true, /*all_logits=*/true);
  ForwardOutput out;
  runner.forward(batch, out);
  EXPECT_EQ(out.logits.size(), size_t(n) * size_t(runner.config().vocab_size));
  return out.logits;
}

// Rows of [n, vocab] logits that differ at all between a and b.
inline std::vector<bool> rows_differ(const std::vector<float>& a, const std::vector<float>& b,
                                     int vocab) {
  EXPECT_EQ(a.size(), b.size());
  std::vector<bool> differ(std::max(a.size(), b.size()) / size_t(vocab), false);
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    differ[i / size_t(vocab)] = differ[i / size_t(vocab)] || a[i] != b[i];
  return differ;
}

}  // namespace sparkglm::fault_reach
