#pragma once
// The device memory of the CUDA runner, laid out by one function per region so that the memory
// plan (how many bytes, before anything is allocated) and the carving (the pointers) can never
// disagree: `Carve` walks the same fields in both modes.
#include <cstddef>
#include <cstdint>

#include "engine/backend/cuda/dsa_indexer.h"
#include "engine/backend/cuda/sampling_topk_topp.h"
#include "engine/model/config.h"
#include "engine/runtime/latent_cache.h"

namespace sparkglm::cuda {

inline constexpr int kMlaRowChunk = 256;   // query rows per pass of the MLA attention
inline constexpr int kLogitChunk = 64;     // logit rows per LM-head pass and host copy
inline constexpr int kDecodeMaxRows = 32;  // rows of the weight-streaming decode kernels
inline constexpr int kChainStride = 8;     // words per slice in draft_chain.h's maps and chains

// Hands out 256-byte-aligned slices of one allocation; with base == nullptr it only counts.
class Carve {
 public:
  explicit Carve(void* base) : base_(static_cast<char*>(base)) {}
  template <typename T>
  T* take(int64_t count) {
    const size_t at = used_;
    used_ += (size_t(count) * sizeof(T) + 255) / 256 * 256;
    return base_ ? reinterpret_cast<T*>(base_ + at) : nullptr;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

struct RunnerShape {
  int64_t rows;      // max rows of a step
  int max_seqs;      // state slots
  int table_stride;  // blocks per sequence
  int max_pools;     // indexer pools a query can see
  int attend_max;    // entries a sparse query attends: topk_pools * kpool + kpool - 1
  bool spark;        // --precision-mode spark: the MoE's spark workspaces, no grouped-GEMM one
  bool drafts;       // speculative decoding with an MTP module: the draft rows of a verify step
};

// Activations of one step.
struct Workspace {
  // residual and block I/O
  float *X, *y, *normed, *block_out, *post, *comb, *hc_partials;
  float* X_next;  // the residual after a folded hc_post (mhc.h: HcFold), kHcFoldRows rows
  // The MTP module's BF16 input [rows, 2D] (norms.h: MtpEntry::cat): X's last quarter, which the
  // module (a plain residual in X's first) leaves alone, so a pass's input never meets the rows
  // of z a launch writing it reads.
  uint16_t* mtp_cat;
  uint16_t* normed_bf16;
  // KDA
  float *raw_q, *raw_k, *raw_v, *q, *k, *v, *f, *decay, *gate, *o, *low, *b_logit, *beta;
  uint16_t *low_bf16, *o_bf16;
  // MLA
  float *latent, *index_keys, *index_gates, *cq, *mq, *q_tilde, *o_bar, *mo, *iq, *iw;
  float *scores, *attn_ws;
  uint16_t *cq_bf16, *mo_bf16;
  uint16_t *mq_bf16, *o_bar_bf16;  // BF16 operands of the tensor-core W_kb / W_vb products
  int32_t *lists, *counts;
  void* select_ws;  // dsa_select's workspace for a pass of rows (dsa_select_workspace_bytes)
  size_t attn_ws_bytes;
  // MoE and dense MLP
  float *router_logits, *expert_weights, *moe_y, *moe_shared_gu, *moe_shared_y, *gu;
  int32_t *experts, *moe_groups;
  uint16_t *moe_h, *moe_shared_h, *mlp_h;
  void* moe_prefill_ws;
  uint16_t* spark_xq;  // [dec * k, D] spark's FP4-rounded routed inputs (spark only)
  float* spark_gu;     // [dec * k, 2W] spark's gate/up products (spark only)
  // head
  float *head_rows, *logits;
  // Seeded draws on the device (sample_top_k_top_p): the step's RowDraws and the sampler's scratch
  // for one chunk of logit rows.
  SampleParams* draws;
  void* sample_scratch;
  uint16_t* head_bf16;
  // Drafts inside a verify step (StepSampling::draft_on_picks; empty unless RunnerShape::drafts):
  // for its at most kDecodeMaxRows rows in step order, the MTP module's logits and each row's
  // greedy pick, which is also the module's input token there. The main model's logits of those
  // rows are in `logits`.
  float* draft_logits;
  int32_t* draft_picks;
  // The chained passes after them (draft_chain.h, StepSampling::draft_chain), one row per
  // slice: a pass's logits [rows, vocab]; the slices' row maps and chains [rows, kChainStride],
  // each verify row's first draft, a pass's picks.
  float* chain_logits;
  int32_t *chain_map, *chain_out, *chain_first_picks, *chain_picks;

  static Workspace carve(Carve& c, const ModelConfig& m, const RunnerShape& s);
};

// Per-sequence and per-token state.
struct Caches {
  uint8_t* latents;    // [mla cache layers][blocks * block_size][record]
  float* index_keys;   // [mla cache layers][blocks * block_size][index_dim]
  float* index_gates;  // [mla cache layers][blocks * block_size]
  float* pooled_keys;  // [mla cache layers][blocks * block_size / kpool][index_dim] (PooledKeys)
  float* kda_state;    // [kda layers][slots][H * K * V]
  float* kda_conv;     // [kda layers][slots][3][taps - 1][H * K]
  // The prefix cache's KDA snapshots: whole-slot copies (SequenceSlice::save_snapshot).
  float* snapshot_state;  // [snapshots][kda layers][H * K * V]
  float* snapshot_conv;   // [snapshots][kda layers][3][taps - 1][H * K]
  // Speculative decoding's KDA state records (CacheGeometry::state_records per slot): the state
  // and conv history after a verify slice's rows (SequenceSlice::record_states), or before one of
  // them (record_before_row, in record 0).
  float* record_state;  // [kda layers][slots][records][H * K * V]
  float* record_conv;   // [kda layers][slots][records][3][taps - 1][H * K]
  int records;          // per slot
  int64_t tokens;       // blocks * block_size
  int64_t record_bytes;

  static Caches carve(Carve& c, const ModelConfig& m, int num_blocks, int block_size, KvDtype dtype,
                      int slots, int snapshots = 0, int records = 0);
  uint8_t* latent_layer(int layer) const { return latents + layer * tokens * record_bytes; }
  float* pooled_layer(int layer, int64_t index_dim) const {
    return pooled_keys + layer * (tokens / kIndexKpool) * index_dim;
  }
};

}  // namespace sparkglm::cuda
