#pragma once
// The one place a device name becomes a ModelRunner: the model (a preset with dummy weights or a
// checkpoint directory), the backend, and its caches sized from a memory budget. sparkglm-serve
// and the benchmarks build their runner here, so both measure the same engine.
//
// cpu:  weights on the host, converted by the precision mode (engine/model/precision_mode.h) before
//       the ranks shard them, so every rank's shard is a slice of one converted model; the KV pool
//       is kv_cache_bytes (or min(1 GiB, max_num_seqs full sequences)) on each rank, counted with
//       the KV shard's bytes per block when there are several ranks and kv_shard.
// cuda: weights on the device in their stored formats (a preset's dummy weights are generated
//       there in weight_format, never on the host; a checkpoint is uploaded as stored,
//       DeviceWeights), in spark with the KDA and shared-expert projections converted to NVFP4
//       there (the CPU's bytes) and the routed experts through spark_moe.h; the KV pool
//       is kv_cache_bytes, or what gpu_memory_utilization of the device's memory leaves after
//       weights, state slots and workspaces.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/thread_pool.h"
#include "engine/dist/communicator.h"
#include "engine/model/config.h"
#include "engine/model/model_loader.h"
#include "engine/model/model_runner.h"
#include "engine/model/precision_mode.h"
#include "engine/runtime/latent_cache.h"

namespace sparkglm {

struct RunnerRequest {
  std::string device = "cpu";  // cpu | cuda
  std::string preset;          // a preset name, or
  std::string model_dir;       // a checkpoint directory (wins when set)
  int num_layers = 0;          // > 0: cut the preset's depth, keeping the layer pattern
  uint64_t seed = 0;           // dummy weights
  PrecisionMode precision_mode = PrecisionMode::kStrict;  // MODEL.md section 7
  // A preset's dummy weights in this checkpoint format (checkpoint_format.h): fp4-local on cuda
  // keeps them quantized on the device (DeviceWeights), on cpu dequantizes them at bind. A
  // checkpoint directory has its own formats: fp4-local with model_dir is refused.
  CheckpointFormat weight_format = CheckpointFormat::kBf16;
  int block_size = 16;
  int max_num_seqs = 4;       // KDA state slots
  int num_snapshots = 0;      // KDA state snapshots of the prefix cache (0: no cache)
  int state_records = 0;      // KDA state records per slot for verify slices (speculation: k + 1)
  int decode_slice_rows = 1;  // rows of one decode slice (speculative_slice_rows)
  // The prefix cache's disk tier is on: its host staging buffers (PrefixStore::staging_bytes, all
  // of them) come out of the CPU KV pool's budget.
  bool prefix_disk_tier = false;
  int max_seq_len = 0;             // 0: the model's max_position_embeddings
  int max_tokens_per_step = 8192;  // rows of one forward: sizes the device workspaces
  KvDtype kv_dtype = KvDtype::kBF16;
  size_t kv_cache_bytes = 0;  // 0: sized by the device (see above)
  double gpu_memory_utilization = 0.9;
  bool cuda_graphs = true;  // capture decode and verify steps in CUDA graphs
  // --profile-steps: device time by model part, printed when the runner is destroyed (cuda only;
  // the CPU backend refuses it).
  bool profile_steps = false;
  // A test hook: > 0 provokes a device fault when step N + 1 is submitted (a real illegal address
  // on CUDA, Error(kDeviceFatal) on the CPU); see engine/backend/device_fault_injector.h.
  int64_t inject_device_fault_after_steps = 0;
  // Tensor and expert parallelism: this rank's communicator (null: one rank). The CPU backend
  // shards the model by rank (engine/backend/cpu/weight_shard.h); CUDA refuses it until its
  // NCCL communicator exists (docs/parallel.md).
  dist::Communicator* comm = nullptr;
  // With several ranks on the CPU: each stores the latents of the positions p % ranks == rank only
  // (the KV shard, docs/parallel.md), so the same kv_cache_bytes holds more tokens.
  bool kv_shard = true;
};

struct BuiltRunner {
  ModelConfig config;
  std::string model_id;                     // the preset name or the directory's name
  std::string weights_identity;             // "dummy:seed=..." or the checkpoint's shard hashes
  std::unique_ptr<LoadedModel> host_model;  // null when the weights were made on the device
  std::unique_ptr<ModelRunner> runner;
  int pool_tokens = 0;                 // num_blocks * block_size
  int max_seq_len = 0;                 // the request's, or what the model and backend allow
  size_t kv_bytes = 0;                 // device or host bytes of the latent cache
  std::vector<std::string> log_lines;  // what was sized and why, for the server log
};

// Throws Error(kInvalidArgument) when the budget holds no block, Error(kUnsupported) for a device
// this build lacks or a model the backend cannot serve, Error(kCapacity) naming every part of the
// memory plan when the device cannot hold the weights, state and workspace.
BuiltRunner build_runner(const RunnerRequest& request, ThreadPool& pool);

// True when this binary was built with the CUDA backend.
bool cuda_backend_built();

}  // namespace sparkglm
