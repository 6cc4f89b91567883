#pragma once
// The CPU reference backend's forward pass: MODEL.md end to end over one flattened batch, in FP32
// arithmetic over BF16/FP32 weights, multithreaded.
#include <memory>
#include <vector>

#include "engine/backend/cpu/kda_layer.h"
#include "engine/backend/cpu/weight_shard.h"
#include "engine/core/thread_pool.h"
#include "engine/dist/communicator.h"
#include "engine/dist/rank_steps.h"
#include "engine/model/engine_fault.h"
#include "engine/model/model_runner.h"
#include "engine/model/selection_trace.h"
#include "engine/model/weights.h"
#include "engine/runtime/kda_state_pool.h"
#include "engine/runtime/latent_cache.h"

namespace sparkglm::cpu {

struct CpuRunnerOptions {
  int num_blocks = 256;     // latent-cache blocks
  int block_size = 16;      // tokens per block
  int num_state_slots = 4;  // KDA state slots (concurrent sequences)
  KdaPath kda_path = KdaPath::kAuto;
  KvDtype kv_dtype = KvDtype::kF32;  // the reference keeps FP32; serving uses bf16 or fp8_g128
  int num_snapshots = 0;             // KDA state snapshots beside the slots (the prefix cache's)
  int state_records = 0;  // rows per slot a verify slice records (speculative decoding: k + 1)
  // Tensor and expert parallelism (weight_shard.h, docs/parallel.md): this rank's communicator,
  // null for one rank. Every rank runs the same calls; the runner all-reduces each block's output.
  dist::Communicator* comm = nullptr;
  // The KV shard (latent_cache.h, docs/parallel.md): with several ranks each stores the latents
  // of the positions p % ranks == rank only. Off: every rank stores every latent.
  bool kv_shard = true;
  // A negative control built in on purpose (engine_fault.h): only tests set one.
  EngineFault fault = EngineFault::kNone;
  // Records each sparse row's attended tokens (selection_trace.h): only tests set one.
  SelectionTrace* selection_trace = nullptr;
};

class CpuModelRunner : public ModelRunner {
 public:
  CpuModelRunner(const ModelConfig& config, const ModelWeights& weights,
                 const CpuRunnerOptions& options, ThreadPool& pool);

  const ModelConfig& config() const override { return config_; }
  CacheGeometry cache_geometry() const override {
    return {options_.num_blocks, options_.block_size, options_.num_state_slots,
            options_.num_snapshots, options_.state_records};
  }
  void forward(const ForwardBatch& batch, ForwardOutput& out) override;
  void forward_mtp(const ForwardBatch& batch, const std::vector<float>& hidden,
                   ForwardOutput& out) override;

  // With several ranks: steps pick greedy tokens across the vocabulary shards (dist::RankSteps).
  void submit(const ForwardBatch& batch, const StepSampling& sampling) override;
  void collect(StepResult& result) override;
  // The default pipeline's early main rows; not with several ranks (their steps are dist's).
  bool main_rows_early() const override { return !steps_; }
  bool drafts_over_prompts() const override { return !steps_; }  // the default pipeline's

  // Host copies (the prefix cache's disk tier): the caches are host memory already; a copy first
  // runs the steps queued before it.
  size_t host_block_bytes() const override { return cache_.block_bytes(); }
  size_t host_snapshot_bytes() const override { return KdaStatePool::snapshot_bytes(config_); }
  void copy_block_to_host(int32_t block, std::byte* host) override;
  void copy_block_from_host(int32_t block, const std::byte* host) override;
  void copy_snapshot_to_host(int snapshot, std::byte* host) override;
  void copy_snapshot_from_host(int snapshot, const std::byte* host) override;

  LatentCache& latent_cache() { return cache_; }
  KdaStatePool& state_pool() { return states_; }
  const CpuRunnerOptions& options() const { return options_; }

 private:
  void embed(const ForwardBatch& batch, float* rows /*[T, D]*/) const;
  void attention(int layer, const LayerWeights& w, const ForwardBatch& batch, const float* x,
                 float* out);
  void ffn(const LayerWeights& w, const float* x, int64_t rows, float* out);
  // logits [logit_rows, vocab] = lm_head(RMSNorm(h[logit_rows]; norm)).
  // With several ranks and !gather, only this rank's vocabulary part: [logit_rows, vocab / W].
  void logits(const ForwardBatch& batch, const float* h, const float* norm, ForwardOutput& out,
              bool gather = true);
  void forward_rows(const ForwardBatch& batch, ForwardOutput& out, bool gather);
  void all_reduce(float* data, int64_t n) const;  // the row-parallel sum; nothing on one rank
  void mla(const MlaWeights& w, int cache_layer, const ForwardBatch& batch, const float* x,
           float* out);

  ModelConfig config_;
  CpuRunnerOptions options_;
  std::unique_ptr<WeightShard> shard_;      // null on one rank
  const ModelConfig& local_;                // the layers' shapes: config_, or the shard's heads
  const ModelWeights& weights_;             // the model, or this rank's shard of it
  std::unique_ptr<dist::RankSteps> steps_;  // null on one rank
  ThreadPool& pool_;
  LatentCache cache_;
  KdaStatePool states_;
};

}  // namespace sparkglm::cpu
