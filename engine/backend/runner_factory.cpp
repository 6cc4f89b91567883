#include "engine/backend/runner_factory.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <functional>
#include <string>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/backend/device_fault_injector.h"
#include "engine/backend/memory_plan.h"
#include "engine/core/error.h"
#include "engine/model/checkpoint.h"
#include "engine/runtime/prefix_store.h"

#if SPARKGLM_HAVE_CUDA
#include <cuda_runtime.h>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/backend/cuda/device_fault.h"
#include "engine/backend/cuda/dsa_indexer.h"
#endif

namespace sparkglm {

namespace {

// Without kv_cache_bytes the CPU pool holds max_num_seqs full requests, up to this much.
constexpr size_t kCpuDefaultKvBudget = size_t(1) << 30;

std::string model_name(const RunnerRequest& r, const LoadedModel* m) {
  return m ? m->name : r.preset;
}

void pool_line(BuiltRunner& b, int num_blocks, int block_size, KvDtype dtype, int slots,
               int snapshots, int max_seq_len, const std::string& why) {
  b.pool_tokens = num_blocks * block_size;
  b.log_lines.push_back(
      "KV pool: " + std::to_string(num_blocks) + " blocks of " + std::to_string(block_size) +
      " tokens = " + std::to_string(b.pool_tokens) + " tokens (" + to_string(dtype) + ", " +
      std::to_string(b.kv_bytes >> 20) + " MiB" + why + "); " + std::to_string(slots) +
      " state slots" +
      (snapshots > 0 ? " + " + std::to_string(snapshots) + " prefix snapshots" : std::string()) +
      "; max-seq-len " + std::to_string(max_seq_len) + "; the deepest request it holds: " +
      std::to_string(std::min<int64_t>(b.pool_tokens, max_seq_len)) + " tokens");
}

std::string precision_line(PrecisionMode mode) {
  return std::string("precision mode ") + precision_mode_name(mode) +
         (mode == PrecisionMode::kSpark
              ? ": KDA and shared-expert weights converted to NVFP4 (round to nearest even), "
                "routed-expert activations rounded through NVFP4 row by row"
              : ": the checkpoint's weight formats");
}

// The ranks a CPU pool's latents are split over (1: every rank stores every latent).
int cpu_latent_ranks(const RunnerRequest& r) {
  return r.kv_shard && r.comm ? r.comm->world_size() : 1;
}

// What the KV shard gives: bytes a token on each rank with and without it, and the ratio.
std::string kv_shard_line(const ModelConfig& mc, const RunnerRequest& r, int ranks) {
  const size_t whole =
      LatentCache::bytes_per_block(mc, r.block_size, r.kv_dtype) / size_t(r.block_size);
  const size_t shard =
      LatentCache::bytes_per_block(mc, r.block_size, r.kv_dtype, ranks) / size_t(r.block_size);
  char gain[32];
  std::snprintf(gain, sizeof gain, "%.2f", double(whole) / double(shard));
  return "KV shard: each of the " + std::to_string(ranks) +
         " ranks stores the latents of the positions p % " + std::to_string(ranks) +
         " = its rank, every rank all indexer keys: " + std::to_string(shard) +
         " bytes a token on each rank instead of " + std::to_string(whole) + ", " + gain +
         "x the tokens in the same memory (--kv-shard off: replicated)";
}

BuiltRunner build_cpu(const RunnerRequest& r, ThreadPool& pool) {
  if (r.profile_steps)
    throw Error(ErrorKind::kUnsupported,
                "--profile-steps: the CPU backend has no step profiler (use --device cuda)");
  BuiltRunner b;
  b.host_model = r.model_dir.empty()
                     ? load_model_preset(r.preset, r.num_layers, r.seed, pool, r.weight_format)
                     : load_model_dir(r.model_dir);
  // Before CpuModelRunner shards the model: every rank slices the same converted matrices (a rank
  // converting only its slice would quantize with another global scale).
  apply_precision_mode(b.host_model->config, r.precision_mode, b.host_model->weights);
  b.log_lines.push_back(precision_line(r.precision_mode));
  b.config = b.host_model->config;
  b.model_id = model_name(r, b.host_model.get());
  b.weights_identity = b.host_model->weights.identity;
  const ModelConfig& mc = b.config;
  b.max_seq_len = int(std::min<int64_t>(
      r.max_seq_len > 0 ? r.max_seq_len : mc.max_position_embeddings, INT_MAX / 2));
  const int latent_ranks = cpu_latent_ranks(r);
  const size_t block_bytes =
      LatentCache::bytes_per_block(mc, r.block_size, r.kv_dtype, latent_ranks);
  size_t budget = r.kv_cache_bytes;
  if (budget == 0)
    budget = std::min(
        kCpuDefaultKvBudget,
        block_bytes * size_t(int64_t(r.max_num_seqs) * (b.max_seq_len / r.block_size + 1)));
  if (r.prefix_disk_tier) {
    // The disk tier moves blocks and snapshots through host staging buffers: host memory, like the
    // pool.
    const size_t staging =
        PrefixStore::staging_bytes(block_bytes, KdaStatePool::snapshot_bytes(mc));
    if (staging >= budget)
      throw Error(ErrorKind::kInvalidArgument,
                  "--prefix-cache-dir: the disk tier's host staging (" + std::to_string(staging) +
                      " bytes) leaves nothing of the KV pool's budget (" + std::to_string(budget) +
                      " bytes; raise --kv-cache-memory-bytes)");
    budget -= staging;
    b.log_lines.push_back("prefix cache disk tier: " + std::to_string(staging >> 10) +
                          " KiB of host staging taken from the KV pool's budget");
  }
  const int num_blocks =
      LatentCache::blocks_for_budget(mc, r.block_size, r.kv_dtype, budget, latent_ranks);
  if (num_blocks < 1)
    throw Error(ErrorKind::kInvalidArgument, "--kv-cache-memory-bytes=" + std::to_string(budget) +
                                                 " holds no KV block of " +
                                                 std::to_string(r.block_size) + " tokens");
  cpu::CpuRunnerOptions o;
  o.num_blocks = num_blocks;
  o.block_size = r.block_size;
  o.num_state_slots = r.max_num_seqs;
  o.num_snapshots = r.num_snapshots;
  o.state_records = r.state_records;
  o.kv_dtype = r.kv_dtype;
  o.comm = r.comm;
  o.kv_shard = r.kv_shard;
  auto runner = std::make_unique<cpu::CpuModelRunner>(mc, b.host_model->weights, o, pool);
  b.kv_bytes = runner->latent_cache().bytes();
  b.runner = std::move(runner);
  pool_line(b, num_blocks, r.block_size, r.kv_dtype, r.max_num_seqs, r.num_snapshots, b.max_seq_len,
            latent_ranks > 1 ? ", the KV shard's part on each rank" : "");
  if (latent_ranks > 1) b.log_lines.push_back(kv_shard_line(mc, r, latent_ranks));
  return b;
}

#if SPARKGLM_HAVE_CUDA
ModelConfig request_config(const RunnerRequest& r) {
  if (!r.model_dir.empty()) return ModelConfig::load(r.model_dir + "/config.json");
  return preset_config_at_depth(r.preset, r.num_layers);
}

// Memory plan: of gpu_memory_utilization x total device memory, what was already in use when we
// started (other processes, the CUDA context), the weights, the state slots, the step workspace
// and a reserve for cuBLAS and captured graphs (kCudaReserveBytes) come first; the KV pool gets
// the rest.

BuiltRunner build_cuda(const RunnerRequest& r, ThreadPool& pool) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    throw Error(ErrorKind::kUnsupported, "--device cuda: no CUDA device is visible");
  if (r.comm && r.comm->world_size() > 1)
    throw Error(ErrorKind::kUnsupported,
                "--tp-size " + std::to_string(r.comm->world_size()) +
                    " --device cuda: the CUDA runner does not shard its weights yet (the NCCL "
                    "communicator exists, the sharded runner does not); tensor parallelism runs "
                    "on --device cpu (docs/parallel.md)");
  BuiltRunner b;
  b.config = request_config(r);
  const ModelConfig& mc = b.config;
  cuda::CudaModelRunner::check_config(mc);  // before a byte of the device is touched
  const int index_limit = cuda::kIndexMaxPools * mc.index_kpool;
  if (r.max_seq_len > index_limit)
    throw Error(ErrorKind::kUnsupported, "--max-seq-len " + std::to_string(r.max_seq_len) +
                                             ": the CUDA backend's indexer selects over at most " +
                                             std::to_string(index_limit) + " tokens");
  b.max_seq_len = int(std::min<int64_t>(
      r.max_seq_len > 0 ? r.max_seq_len : mc.max_position_embeddings, index_limit));
  if (r.max_seq_len <= 0 && b.max_seq_len < mc.max_position_embeddings)
    b.log_lines.push_back("max-seq-len " + std::to_string(b.max_seq_len) +
                          " (the CUDA indexer's limit; the model allows " +
                          std::to_string(mc.max_position_embeddings) + ")");

  cudaDeviceProp prop{};
  SPARKGLM_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  size_t free_bytes = 0, total_bytes = 0;
  SPARKGLM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  cuda::CudaRunnerOptions o;
  o.block_size = r.block_size;
  o.num_state_slots = r.max_num_seqs;
  o.num_snapshots = r.num_snapshots;
  o.state_records = r.state_records;
  o.decode_slice_rows = r.decode_slice_rows;
  o.max_rows = r.max_tokens_per_step;
  o.max_seq_len = b.max_seq_len;
  o.kv_dtype = r.kv_dtype;
  o.graphs = r.cuda_graphs;
  o.profile_steps = r.profile_steps;
  o.precision_mode = r.precision_mode;
  // A checkpoint is opened (mapped, not read) before the plan: its stored formats size the arena.
  const std::shared_ptr<Checkpoint> checkpoint =
      r.model_dir.empty() ? nullptr : Checkpoint::open(r.model_dir);
  MemoryDemand demand;
  demand.weights = checkpoint
                       ? cuda::DeviceWeights::arena_bytes(mc, *checkpoint, r.precision_mode)
                       : cuda::DeviceWeights::arena_bytes(mc, r.weight_format, r.precision_mode);
  // The prefix cache's KDA snapshots are state too: taken out of the pool's budget.
  demand.state =
      cuda::CudaModelRunner::state_bytes(mc, r.max_num_seqs, r.num_snapshots, r.state_records);
  demand.workspace = cuda::CudaModelRunner::workspace_bytes(mc, o);
  demand.reserve = kCudaReserveBytes;
  o.num_blocks = 1000;
  const size_t per_1000 = cuda::CudaModelRunner::cache_bytes(mc, o);
  o.num_blocks = 0;
  demand.per_block = (per_1000 - cuda::CudaModelRunner::cache_bytes(mc, o)) / 1000 + 1;
  const PoolPlan plan =
      plan_kv_pool({prop.name, total_bytes, free_bytes}, demand, r.gpu_memory_utilization,
                   r.kv_cache_bytes, r.block_size, INT_MAX / r.block_size, r.model_dir.empty());
  o.num_blocks = plan.num_blocks;

  std::unique_ptr<cuda::DeviceWeights> dw;
  if (!checkpoint) {
    dw = cuda::DeviceWeights::generate(mc, r.seed, r.weight_format, r.precision_mode);
    b.model_id = r.preset;
  } else {
    dw = cuda::DeviceWeights::upload(mc, *checkpoint, r.precision_mode);
    b.model_id = model_dir_name(r.model_dir);
  }
  b.weights_identity = dw->identity();
  b.log_lines.push_back(precision_line(r.precision_mode) +
                        (r.precision_mode == PrecisionMode::kSpark
                             ? " (emulated on this device: FP4 values in BF16 tensor-core "
                               "products, docs/cuda-engine.md)"
                             : ""));
  b.runner = std::make_unique<cuda::CudaModelRunner>(mc, std::move(dw), o);
  b.log_lines.push_back(cuda::CudaModelRunner::graph_plan(mc, o));
  b.kv_bytes = cuda::CudaModelRunner::cache_bytes(mc, o) - demand.state;
  if (r.prefix_disk_tier)  // host memory, not the device's: the KV pool above is unchanged
    b.log_lines.push_back(
        "prefix cache disk tier: " +
        std::to_string(PrefixStore::staging_bytes(b.runner->host_block_bytes(),
                                                  b.runner->host_snapshot_bytes()) >>
                       10) +
        " KiB of host staging (host memory; the device's KV pool is unchanged)");
  b.log_lines.push_back(
      std::string("CUDA device: ") + prop.name + ", " + gib_text(total_bytes) + "; " + plan.parts +
      (r.model_dir.empty() ? std::string(" (") + checkpoint_format_name(r.weight_format) +
                                 " dummy weights made on the device)"
                           : std::string(" (uploaded in its stored formats)")) +
      "; decode graphs " + (r.cuda_graphs ? "on" : "off") +
      (r.profile_steps ? "; step profile on (device time by part at exit)" : ""));
  pool_line(b, o.num_blocks, r.block_size, r.kv_dtype, r.max_num_seqs, r.num_snapshots,
            b.max_seq_len, ", " + plan.source);
  (void)pool;
  return b;
}
#endif

}  // namespace

bool cuda_backend_built() {
#if SPARKGLM_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

namespace {

BuiltRunner build_for_device(const RunnerRequest& request, ThreadPool& pool) {
  if (!request.model_dir.empty() && request.weight_format != CheckpointFormat::kBf16)
    throw Error(ErrorKind::kInvalidArgument,
                std::string("--weight-format ") + checkpoint_format_name(request.weight_format) +
                    " with --model: a checkpoint directory has its own formats (the option "
                    "shapes a preset's dummy weights)");
  if (request.device == "cpu") return build_cpu(request, pool);
  if (request.device == "cuda") {
#if SPARKGLM_HAVE_CUDA
    return build_cuda(request, pool);
#else
    throw Error(ErrorKind::kUnsupported,
                "--device cuda: this binary was built without the CUDA backend "
                "(configure with -DSPARKGLM_CUDA=ON on a machine with the CUDA toolkit)");
#endif
  }
  throw Error(ErrorKind::kInvalidArgument, "--device " + request.device + ": expected cpu or cuda");
}

}  // namespace

BuiltRunner build_runner(const RunnerRequest& request, ThreadPool& pool) {
  BuiltRunner b = build_for_device(request, pool);
  const int64_t after = request.inject_device_fault_after_steps;
  if (after <= 0) return b;
  std::function<void()> provoke = throw_injected_device_fault(after);
#if SPARKGLM_HAVE_CUDA
  if (request.device == "cuda") provoke = [] { cuda::provoke_illegal_address(); };
#endif
  b.runner = std::make_unique<DeviceFaultInjector>(std::move(b.runner), after, std::move(provoke));
  b.log_lines.push_back("TEST HOOK: a device fault is injected after " + std::to_string(after) +
                        " engine steps (--inject-device-fault-after-steps)");
  return b;
}

}  // namespace sparkglm
