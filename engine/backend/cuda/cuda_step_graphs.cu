// CUDA graphs of the CUDA runner's steps. A step whose rows are all decode rows (at most
// kDecodeMaxRows) launches the same kernels with the same arguments whenever it has the same
// GraphKey: the rows of each KDA group (the decode rows as one group, or a verify step's waves:
// step_layout.h), how many of its rows attend densely (they come first; the rest use the
// indexer), the attention's length bucket (mla_decode's split grid), the pool bucket its sparse
// rows are scored over (dsa_pool_scores bounded by the rows' positions, dsa_select's grid), and
// whether it keeps KDA state records after or before its rows (kda.h: KdaRowRecords), and whether
// it runs the draft rows of speculative decoding after the layers. forward_mtp over decode rows
// (the drafter's chained passes, one row a sequence) is graphed the same way, its own key marked
// `mtp`: the MTP module alone, on hidden states at a fixed place. Everything else it
// reads sits at fixed device addresses: StepInputs' arrays (tokens, page rows, positions,
// lengths, slots, block tables, record words), the caches and the workspace. So the first step of
// a key is captured and later ones replay it, verify steps as plain decode steps; a row computes
// the same bits graphed or eager (the same launches, the same buckets), and a verify row the bits
// of a one-row decode row (the same kernels). A sparse row's scores and attended set do not
// depend on the pool bucket: each pool is scored alone, and the selection is a rule on them.
//
// Bounds: plain decode keys of dense rows only are at most min(kDecodeMaxRows, slots) row counts
// times the length buckets; those with sparse rows are capped at max_sparse_graphs and verify
// keys at max_verify_graphs (first come), a step of a new shape beyond its cap runs eagerly.
// graph_plan() states the bounds at start; graph_stats() counts the captures, the steps they ran
// and the device memory they took.
#include <algorithm>
#include <set>
#include <string>
#include <tuple>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/backend/cuda/mla_decode.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

// The attention grid's length for decode rows of at most `length` tokens: a power of two times
// kMlaSplitTokens, capped by what a sparse row attends.
int length_bucket(int length, int attend_max) {
  int bucket = kMlaSplitTokens;
  while (bucket < length) bucket *= 2;
  return std::min(bucket, attend_max);
}

// The pools sparse decode rows of at most `pools` pools are scored over: a power of two from
// kMinPoolBucket, capped by the workspace's max_pools.
constexpr int kMinPoolBucket = 64;
int pool_bucket(int pools, int max_pools) {
  int bucket = kMinPoolBucket;
  while (bucket < pools) bucket *= 2;
  return std::min(bucket, max_pools);
}

}  // namespace

bool CudaModelRunner::GraphKey::operator<(const GraphKey& o) const {
  return std::tie(groups, dense, bucket, pool_bucket, records_after, records_before, drafts, mtp,
                  chain, chain_rows, chain_dense, chain_bucket, chain_pool_bucket, slices,
                  longest_slice) < std::tie(o.groups, o.dense, o.bucket, o.pool_bucket,
                                            o.records_after, o.records_before, o.drafts, o.mtp,
                                            o.chain, o.chain_rows, o.chain_dense, o.chain_bucket,
                                            o.chain_pool_bucket, o.slices, o.longest_slice);
}

int CudaModelRunner::sparse_pool_bucket() const {
  const std::vector<int32_t>& pos = step_->positions();
  int pools = 0;
  for (int r = step_->dense_decode_rows(); r < step_->decode_rows(); ++r)
    pools = std::max(pools, (pos[size_t(r)] + 1) / config_.index_kpool);
  return pools > 0 ? pool_bucket(pools, shape().max_pools) : 0;
}

void CudaModelRunner::set_chain_buckets() {
  // The chain's rows sit at their furthest positions (draft_chain.h): these bound every pass.
  std::swap(step_, chain_step_);
  chain_bucket_ = length_bucket(std::max(1, step_->max_decode_length()), shape().attend_max);
  chain_pool_bucket_ = sparse_pool_bucket();
  std::swap(step_, chain_step_);
}

void CudaModelRunner::set_eager_buckets() {
  length_bucket_ = std::max(1, step_->max_decode_length());
  pool_bucket_ = sparse_pool_bucket();
}

std::string CudaModelRunner::graph_plan(const ModelConfig& config,
                                        const CudaRunnerOptions& options) {
  if (!options.graphs) return "CUDA graphs: off (--enforce-eager): every step runs eagerly";
  const int attend_max = runner_shape(config, options).attend_max;
  std::set<int> buckets;
  for (int length = 1;; length *= 2) {
    buckets.insert(length_bucket(std::min(length, options.max_seq_len), attend_max));
    if (length >= options.max_seq_len) break;
  }
  const int rows = std::min(kDecodeMaxRows, options.num_state_slots);
  std::string line = "CUDA graphs: decode steps of 1-" + std::to_string(rows) + " dense rows x " +
                     std::to_string(buckets.size()) + " attention length buckets (at most " +
                     std::to_string(rows * int(buckets.size())) +
                     " graphs); with sparse-indexer rows one graph per (rows, dense rows, length "
                     "bucket, pool bucket), at most " +
                     std::to_string(options.max_sparse_graphs) + ", further shapes eager";
  if (options.decode_slice_rows > 1 || options.state_records > 0) {
    const int verify_rows =
        std::min(kDecodeMaxRows, options.num_state_slots * options.decode_slice_rows);
    line += "; verify steps of up to " + std::to_string(verify_rows) + " rows (slices of up to " +
            std::to_string(options.decode_slice_rows) +
            "), one graph per (rows of each wave, dense rows, length bucket, pool bucket, records "
            "kept), at most " +
            std::to_string(options.max_verify_graphs) +
            " graphs, further shapes eager; the drafter's chained MTP passes one graph per (rows, "
            "dense rows, length bucket, pool bucket), at most " +
            std::to_string(options.max_verify_graphs) + " more";
  }
  return line + "; each capture's device memory is counted (graph_stats)";
}

bool CudaModelRunner::set_eager(bool eager) {
  eager_ = eager;
  graph_stats_.eager_now = eager;
  return options_.graphs;
}

std::optional<CudaModelRunner::GraphKey> CudaModelRunner::graph_key(bool mtp) const {
  if (!options_.graphs || eager_ || options_.selection_trace != nullptr || step_->rows() == 0 ||
      step_->decode_rows() != step_->rows() || step_->rows() > kDecodeMaxRows)
    return std::nullopt;
  GraphKey key;
  for (const StepGroup& g : step_->layout().decode_groups()) key.groups.push_back(g.rows);
  key.dense = step_->dense_decode_rows();
  key.bucket = length_bucket(step_->max_decode_length(), shape().attend_max);
  key.pool_bucket = sparse_pool_bucket();
  key.records_after = step_->layout().records_after();
  key.records_before = step_->layout().records_before();
  key.drafts = !mtp && step_drafts_;
  key.mtp = mtp;
  key.slices = mtp ? 0 : step_->slices();
  key.longest_slice = mtp ? 0 : step_->longest_slice();
  if (key.drafts && chain_passes() > 0) {
    key.chain = chain_passes();
    key.chain_rows = chain_->rows();
    key.chain_dense = chain_step_->dense_decode_rows();
    key.chain_bucket = chain_bucket_;
    key.chain_pool_bucket = chain_pool_bucket_;
  }
  return key;
}

bool CudaModelRunner::launch_graph(bool mtp) {
  const std::optional<GraphKey> key = graph_key(mtp);
  if (!key) return false;
  // What mla_decode and the indexer are launched with, captured or replayed (an eager step of a
  // shape past the caps sets the same, set_eager_buckets).
  length_bucket_ = key->bucket;
  pool_bucket_ = key->pool_bucket;
  auto it = graphs_.find(*key);
  if (it == graphs_.end()) {
    if (key->mtp && graph_stats_.mtp_graphs >= options_.max_verify_graphs) {
      ++graph_stats_.mtp_eager_steps;
      return false;
    }
    if (!key->mtp && key->verify() && graph_stats_.verify_graphs >= options_.max_verify_graphs)
      return false;
    const bool sparse_decode = !key->mtp && !key->verify() && key->pool_bucket > 0;
    if (sparse_decode && sparse_decode_graphs_ >= options_.max_sparse_graphs) return false;
    sparse_decode_graphs_ += sparse_decode ? 1 : 0;
    StepGraph g;
    g.first_mark = profile_.marks();
    profile_.reserve(size_t(16) * size_t(config_.num_hidden_layers + 1));  // no creation in capture
    cudaGraph_t graph = nullptr;
    SPARKGLM_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      if (key->mtp) {
        mtp_module(step_->tokens(), mtp_input());
      } else {
        // A drafting step's first node marks when the device began it (DraftStepTimes::lag).
        if (key->drafts)
          SPARKGLM_CUDA_CHECK(
              cudaEventRecordWithFlags(graph_began_, stream_, cudaEventRecordExternal));
        run_layers();
        if (key->drafts) run_draft_rows();
      }
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    SPARKGLM_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    // What the capture takes on the device: free memory before instantiation and after the
    // upload (coarse: the driver's allocation granularity; summed over graphs in graph_stats).
    size_t free_before = 0, free_after = 0, total = 0;
    SPARKGLM_CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
    const cudaError_t made = cudaGraphInstantiate(&g.exec, graph, 0);
    cudaGraphDestroy(graph);
    SPARKGLM_CUDA_CHECK(made);
    SPARKGLM_CUDA_CHECK(cudaGraphUpload(g.exec, stream_));
    SPARKGLM_CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
    graph_stats_.graph_bytes += free_before > free_after ? free_before - free_after : 0;
    g.parts = profile_.parts_since(g.first_mark);
    (key->mtp        ? graph_stats_.mtp_graphs
     : key->verify() ? graph_stats_.verify_graphs
                     : graph_stats_.decode_graphs) += 1;
    it = graphs_.emplace(*key, std::move(g)).first;
  } else {
    ++graph_replays_;
    SPARKGLM_ASSERT(it->second.first_mark == profile_.marks(),
                    "a step graph replayed after a different number of profile marks");
    profile_.replayed(it->second.parts);
  }
  SPARKGLM_CUDA_CHECK(cudaGraphLaunch(it->second.exec, stream_));
  (key->mtp        ? graph_stats_.mtp_graph_steps
   : key->verify() ? graph_stats_.verify_graph_steps
                   : graph_stats_.decode_graph_steps) += 1;
  return true;
}

}  // namespace sparkglm::cuda
