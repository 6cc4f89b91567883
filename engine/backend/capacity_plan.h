#pragma once
// The memory plan of a model on N devices of one kind, before any device is touched: what each
// device holds (weights, KDA state slots, step workspace, reserve) and the KV pool in tokens that
// --gpu-memory-utilization leaves, through the same plan_kv_pool the CUDA runner uses at start.
// `sparkglm plan` prints it (docs/capacity.md).
//
// Per device, with N devices in one tensor- and expert-parallel group:
//   weights    replicated + sharded / N, each tensor at its stored size in the checkpoint format
//              (checkpoint_format.h). Sharded as engine/backend/cpu/weight_shard.h shards: routed
//              experts (by expert), KDA q/k/v/f_b/g_b/b/o projections, convolutions, A_log and
//              dt_bias (by head), MLA q_b/kv_b/o (by head), dense and shared-expert MLPs (by
//              width), the LM head (by vocabulary). Replicated: the embedding, norms, mHC, router,
//              KDA f_a and g_a, MLA q_a and kv_a, the indexer, MTP eh_proj.
//   state      (max_num_seqs + prefix snapshots) * kda_state_bytes / N (state is split by head)
//   workspace  an estimate of the step's activations, not the CUDA runner's own carve (that needs
//              a CUDA build): FP32 per row of a step (max_tokens_per_step rows) of every buffer the
//              forward keeps (residual streams 2*hc*D, block I/O 4*D, KDA 10*H*K, MLA
//              H*(dn + 2*kv_lora + dv) + I*d_i, router E, routed 2*top_k*moe_inter, shared
//              2*moe_inter*n_shared, dense 2*inter), plus one MLA score chunk (256 rows * H * A,
//              A = index_topk + index_kpool - 1) and one logit chunk (64 rows * vocab)
//   reserve    kCudaReserveBytes (cuBLAS, captured graphs)
//   KV pool    LatentCache::bytes_per_block per block_size tokens: with kv_shard (the KV shard,
//              docs/parallel.md) each device holds the latents of every N-th position and every
//              indexer key and gate (N must divide block_size); without it, every latent
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/backend/memory_plan.h"
#include "engine/model/checkpoint_format.h"
#include "engine/model/config.h"
#include "engine/runtime/latent_cache.h"

namespace sparkglm {

// A device kind the plan knows: its memory and whether the host shares it.
struct DeviceKind {
  std::string name;  // "H200", "GB10"
  size_t memory = 0;
  bool shared_with_host = false;
};

// "h200": 141 GB of HBM3e; "gb10": 128 GB of LPDDR5x shared with the host (DGX Spark). Anything
// else is an Error(kInvalidArgument) naming both.
DeviceKind device_kind(std::string_view name);

struct CapacityRequest {
  CheckpointFormat format = CheckpointFormat::kFp4Local;
  DeviceKind device;
  int devices = 1;
  int max_num_seqs = 4;
  int num_snapshots = 0;
  int64_t max_tokens_per_step = 8192;
  int block_size = 16;
  KvDtype kv_dtype = KvDtype::kFp8G128;
  double gpu_memory_utilization = 0.9;
  bool kv_shard = true;  // split the latents over the devices (--kv-shard)
};

struct CapacityPlan {
  int64_t model_bytes = 0;  // every tensor once, in the checkpoint format
  MemoryDemand demand;      // per device
  bool fits = false;
  PoolPlan pool;          // when it fits
  int64_t kv_tokens = 0;  // when it fits: pool blocks * block_size
  // Bytes a token on each device without the KV shard over bytes with it (1 without a shard):
  // the factor by which the shard multiplies the pool's tokens in the same memory.
  double kv_shard_gain = 1.0;
  std::string why_not;  // when it does not: plan_kv_pool's message
};

// Throws Error(kInvalidArgument) for fewer than one device, or a KV shard whose device count does
// not divide block_size.
CapacityPlan plan_capacity(const ModelConfig& config, const CapacityRequest& request);

// The deepest depth (a multiple of 4, keeping the layer pattern) whose plan fits with at least one
// KV block, or 0 when not even 4 layers fit.
int deepest_fitting_depth(ModelConfig config, const CapacityRequest& request);

}  // namespace sparkglm
