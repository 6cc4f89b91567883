// Host copies of the CUDA runner's caches, for the prefix cache's disk tier (ModelRunner's
// copy_block_to_host and the rest). A block is, for every MLA cache layer (the MTP layer's too),
// its token rows of latent records, indexer keys and gates and its pooled keys; a snapshot is every
// KDA layer's recurrent state and conv history. Each is a handful of contiguous device runs (the
// cache layouts of runner_buffers.h), copied on the runner's stream so that every step submitted
// before runs first, then waited for: the host bytes are written (or may be reused) on return.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/backend/cuda/dsa_indexer.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

std::vector<CudaModelRunner::DeviceRun> CudaModelRunner::block_runs(int32_t block) const {
  if (block < 0 || block >= options_.num_blocks)
    throw Error(ErrorKind::kInvalidArgument, "host copy of block " + std::to_string(block) +
                                                 ": the pool has " +
                                                 std::to_string(options_.num_blocks) + " blocks");
  const int64_t layers = config_.num_mla_layers() + (config_.mtp_layer() >= 0 ? 1 : 0);
  const int64_t bs = options_.block_size, first = int64_t(block) * bs, dim = config_.index_head_dim;
  const int64_t pools = bs / kIndexKpool, first_pool = first / kIndexKpool;
  std::vector<DeviceRun> runs;
  for (int64_t l = 0; l < layers; ++l) {
    const int64_t row0 = l * caches_.tokens + first;  // the block's first row in layer l
    runs.push_back({caches_.latent_layer(int(l)) + first * caches_.record_bytes,
                    size_t(bs * caches_.record_bytes)});
    runs.push_back({caches_.index_keys + row0 * dim, size_t(bs * dim) * sizeof(float)});
    runs.push_back({caches_.index_gates + row0, size_t(bs) * sizeof(float)});
    runs.push_back({caches_.pooled_layer(int(l), dim) + first_pool * dim,
                    size_t(pools * dim) * sizeof(float)});
  }
  return runs;
}

std::vector<CudaModelRunner::DeviceRun> CudaModelRunner::snapshot_runs(int snapshot) const {
  if (snapshot < 0 || snapshot >= options_.num_snapshots)
    throw Error(ErrorKind::kInvalidArgument,
                "host copy of snapshot " + std::to_string(snapshot) + ": the runner has " +
                    std::to_string(options_.num_snapshots) + " snapshots");
  const int64_t H = config_.kda.num_heads, K = config_.kda.head_dim;
  const int64_t layers = config_.num_kda_layers();
  const int64_t state = layers * H * K * K;
  const int64_t conv = layers * 3 * (config_.kda.short_conv_kernel_size - 1) * H * K;
  // A snapshot's layers are contiguous (copy_snapshots writes them so).
  return {{caches_.snapshot_state + snapshot * state, size_t(state) * sizeof(float)},
          {caches_.snapshot_conv + snapshot * conv, size_t(conv) * sizeof(float)}};
}

size_t CudaModelRunner::host_block_bytes() const {
  size_t bytes = 0;
  for (const DeviceRun& r : block_runs(0)) bytes += r.bytes;
  return bytes;
}

size_t CudaModelRunner::host_snapshot_bytes() const {
  if (options_.num_snapshots == 0) return 0;
  size_t bytes = 0;
  for (const DeviceRun& r : snapshot_runs(0)) bytes += r.bytes;
  return bytes;
}

void CudaModelRunner::copy_runs(const std::vector<DeviceRun>& runs, std::byte* host, bool to_host) {
  size_t offset = 0;
  for (const DeviceRun& r : runs) {
    if (to_host)
      SPARKGLM_CUDA_CHECK(
          cudaMemcpyAsync(host + offset, r.device, r.bytes, cudaMemcpyDeviceToHost, stream_));
    else
      SPARKGLM_CUDA_CHECK(
          cudaMemcpyAsync(r.device, host + offset, r.bytes, cudaMemcpyHostToDevice, stream_));
    offset += r.bytes;
  }
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaModelRunner::copy_block_to_host(int32_t block, std::byte* host) {
  copy_runs(block_runs(block), host, true);
}

void CudaModelRunner::copy_block_from_host(int32_t block, const std::byte* host) {
  copy_runs(block_runs(block), const_cast<std::byte*>(host), false);
}

void CudaModelRunner::copy_snapshot_to_host(int snapshot, std::byte* host) {
  copy_runs(snapshot_runs(snapshot), host, true);
}

void CudaModelRunner::copy_snapshot_from_host(int snapshot, const std::byte* host) {
  copy_runs(snapshot_runs(snapshot), const_cast<std::byte*>(host), false);
}

}  // namespace sparkglm::cuda
