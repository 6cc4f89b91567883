#pragma once
// One rank's part of the model for tensor and expert parallelism on the CPU (docs/parallel.md).
//
//   column-parallel, output rows split, zero copy: KDA q/k/v, f_b, g_b, b_proj, convs, A_log and
//     dt_bias of the rank's heads; MLA q_b and kv_b rows of its heads; dense and shared-expert
//     gate/up rows of its width; the LM head rows of its vocabulary range.
//   row-parallel, input columns split, copied to FP32: KDA and MLA o_proj, dense and shared-expert
//     down. Their outputs are partial sums: the runner all-reduces each block's output once.
//   expert-parallel: routed experts [expert_begin, expert_end) run on this rank; the router and
//     the top-k choice are computed on every rank, so every rank agrees on the routing.
//   replicated: embedding, norms, mHC, MLA q_a and kv_a, the indexer, and so the indexer keys of
//     the latent cache; its latents are split by position (the KV shard, latent_cache.h) unless
//     the runner keeps them whole (CpuRunnerOptions::kv_shard off).
// The views point into the full model's weights, which must outlive the shard.
#include <cstdint>

#include "engine/model/config.h"
#include "engine/model/weights.h"

namespace sparkglm::cpu {

struct WeightShard {
  int rank = 0, world = 1;
  ModelConfig local;     // the full config with this rank's KDA/MLA heads and dense width
  ModelWeights weights;  // this rank's views and column-sliced copies (owned)
  int64_t vocab_begin = 0, vocab_end = 0;  // LM-head rows of this rank
  int expert_begin = 0, expert_end = 0;    // routed experts of this rank
};

// Throws Error(kInvalidArgument) naming the first dimension that world_size does not divide
// (KDA heads, MLA heads, dense width, shared-expert width, routed experts, vocabulary).
void check_shardable(const ModelConfig& config, int world_size);

// check_shardable, then rank's shard of `full` (bound for `config`).
WeightShard shard_weights(const ModelConfig& config, const ModelWeights& full, int rank,
                          int world_size);

}  // namespace sparkglm::cpu
