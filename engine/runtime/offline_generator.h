#pragma once
// Runs single sequences through a ModelRunner without a server: chunked prefill, then greedy
// decode. Used by the generation demo, the benchmarks and end-to-end tests; the scheduler of
// sparkglm-serve replaces it for concurrent serving.
#include <cstdint>
#include <vector>

#include "engine/model/model_runner.h"
#include "engine/runtime/block_allocator.h"

namespace sparkglm {

struct GenerationResult {
  std::vector<int32_t> tokens;     // generated ids (without the prompt)
  std::vector<float> last_logits;  // logits that chose the final token
  double prefill_seconds = 0;
  double decode_seconds = 0;  // from the first generated token to the last
};

class OfflineGenerator {
 public:
  OfflineGenerator(ModelRunner& runner, BlockAllocator& blocks, int block_size, int prefill_chunk);

  // Greedy decoding (lowest id among equal maxima) until max_new_tokens or, if stop_at_eos, an eos.
  GenerationResult generate_greedy(const std::vector<int32_t>& prompt, int max_new_tokens,
                                   bool stop_at_eos, int state_slot = 0);
  // Logits [T, vocab] and hidden [T, D] of every prompt position, prefilled in chunks.
  ForwardOutput prompt_outputs(const std::vector<int32_t>& prompt, int state_slot = 0);

 private:
  ModelRunner& runner_;
  BlockAllocator& blocks_;
  int block_size_, prefill_chunk_;
};

int32_t argmax_token(const float* logits, int64_t vocab);

}  // namespace sparkglm
