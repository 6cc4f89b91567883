#include "engine/runtime/offline_generator.h"

#include <algorithm>
#include <chrono>

namespace sparkglm {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int32_t argmax_token(const float* logits, int64_t vocab) {
  int32_t best = 0;
  for (int64_t i = 1; i < vocab; ++i)
    if (logits[i] > logits[best]) best = int32_t(i);
  return best;
}

OfflineGenerator::OfflineGenerator(ModelRunner& runner, BlockAllocator& blocks, int block_size,
                                   int prefill_chunk)
    : runner_(runner), blocks_(blocks), block_size_(block_size), prefill_chunk_(prefill_chunk) {}

ForwardOutput OfflineGenerator::prompt_outputs(const std::vector<int32_t>& prompt, int state_slot) {
  std::vector<int32_t> table;
  ForwardOutput all;
  const int64_t n = int64_t(prompt.size());
  try {
    for (int64_t start = 0; start < n; start += prefill_chunk_) {
      const int64_t end = std::min(n, start + prefill_chunk_);
      blocks_.ensure_capacity(table, end, block_size_);
      ForwardBatch batch;
      batch.add_sequence({prompt.begin() + start, prompt.begin() + end}, int32_t(start), state_slot,
                         table, true, /*all_logits=*/true);
      ForwardOutput out;
      runner_.forward(batch, out);
      all.logits.insert(all.logits.end(), out.logits.begin(), out.logits.end());
      all.hidden.insert(all.hidden.end(), out.hidden.begin(), out.hidden.end());
    }
  } catch (...) {
    blocks_.release_all(table);
    throw;
  }
  blocks_.release_all(table);
  return all;
}

GenerationResult OfflineGenerator::generate_greedy(const std::vector<int32_t>& prompt,
                                                   int max_new_tokens, bool stop_at_eos,
                                                   int state_slot) {
  GenerationResult result;
  const int64_t vocab = runner_.config().vocab_size;
  std::vector<int32_t> table;
  ForwardOutput out;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t n = int64_t(prompt.size());
    for (int64_t start = 0; start < n; start += prefill_chunk_) {
      const int64_t end = std::min(n, start + prefill_chunk_);
      blocks_.ensure_capacity(table, end, block_size_);
      ForwardBatch batch;
      batch.add_sequence({prompt.begin() + start, prompt.begin() + end}, int32_t(start), state_slot,
                         table, /*want_logits=*/end == n);
      batch.seqs.back().decode = false;
      runner_.forward(batch, out);
    }
    result.prefill_seconds = seconds_since(t0);
    const auto t1 = std::chrono::steady_clock::now();
    int64_t pos = n;
    for (int i = 0; i < max_new_tokens; ++i) {
      const int32_t next = argmax_token(out.logits.data(), vocab);
      result.tokens.push_back(next);
      result.last_logits = out.logits;
      if ((stop_at_eos && runner_.config().is_eos(next)) || i + 1 == max_new_tokens) break;
      blocks_.ensure_capacity(table, pos + 1, block_size_);
      ForwardBatch batch;
      batch.add_sequence({next}, int32_t(pos), state_slot, table);
      runner_.forward(batch, out);
      ++pos;
    }
    result.decode_seconds = seconds_since(t1);
  } catch (...) {
    blocks_.release_all(table);
    throw;
  }
  blocks_.release_all(table);
  return result;
}

}  // namespace sparkglm
