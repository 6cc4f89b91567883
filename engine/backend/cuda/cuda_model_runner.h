#pragma once
// The CUDA backend's forward pass: MODEL.md end to end on the device, composing the operators of
// this folder (each checked against the CPU reference by the G1 gate). Weights, the paged latent
// cache, the KDA state slots and every activation live in device memory; a step moves its token
// ids and block tables in (one copy) and the requested logits out (one copy).
//
// Steps of at most kDecodeMaxRows decode rows are captured in CUDA graphs and replayed
// (cuda_step_graphs.cu): the launches of a step cost one graph launch instead of ~20 per layer.
// Plain decode steps: one graph per (rows, dense rows, length bucket, pool bucket), those with
// sparse-indexer rows at most max_sparse_graphs; verify steps: one per (rows of each wave, dense
// rows, length bucket, pool bucket, records kept), at most max_verify_graphs of them; the
// drafter's chained MTP passes (forward_mtp over decode rows): one per (rows, dense rows, length
// bucket, pool bucket), at most max_verify_graphs more. Prefill chunks run eagerly (their launch
// shapes depend on the data).
//
// Speculative decoding (docs/speculative-decoding.md): a verify slice (a decode slice of several
// rows) runs each row as a one-row decode row (step_layout.h: a sequence of its own; the KDA
// recurrence slice by slice, its rows in order inside the kernels), recording the KDA state after
// each row (or before one) in the state records (inside the KDA kernels and the graph: which rows
// record is read from device words), and a later slice resumes from a record (a copy before the
// step's launches, as snapshot restores).
//
// Pipelined steps (submit/collect, cuda_step_pipeline.cu) return before the device has run them:
// greedy tokens are picked on the device and only their ids come back; a later step's rows read
// those picks where they are.
#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/device_weights.h"
#include "engine/backend/cuda/draft_chain.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/moe_quant_table.h"
#include "engine/backend/cuda/norms.h"
#include "engine/backend/cuda/runner_buffers.h"
#include "engine/backend/cuda/step_inputs.h"
#include "engine/backend/cuda/step_profiler.h"
#include "engine/backend/cuda/stream_branch.h"
#include "engine/backend/cuda/token_mask.h"
#include "engine/model/engine_fault.h"
#include "engine/model/model_runner.h"
#include "engine/model/precision_mode.h"
#include "engine/model/selection_trace.h"
#include "engine/runtime/latent_cache.h"

namespace sparkglm::cuda {

struct CudaRunnerOptions {
  int num_blocks = 256;     // latent-cache blocks
  int block_size = 16;      // tokens per block
  int num_state_slots = 4;  // KDA state slots (sequences in flight)
  int num_snapshots = 0;    // KDA state snapshots beside the slots (the prefix cache's)
  // Speculative decoding: KDA state records per slot (CacheGeometry::state_records) and the most
  // rows of one decode slice (1; k + 1 for a verify slice, 2k + 1 with rollback by recompute).
  int state_records = 0;
  int decode_slice_rows = 1;
  int max_rows = 8192 + 4;  // rows of one forward step (prefill budget + decode rows)
  int max_seq_len = 32768;  // sizes the block tables and the indexer's per-sequence buffers
  KvDtype kv_dtype = KvDtype::kBF16;  // bf16 or fp8_g128 latent records
  bool graphs = true;                 // false: --enforce-eager
  int max_verify_graphs = 64;         // verify step shapes captured, and as many chained MTP pass
                                      // shapes; steps of other shapes run eagerly
  int max_sparse_graphs = 64;  // plain decode shapes with sparse rows captured; the rest eager
  bool profile_steps = false;  // device time by model part (StepProfiler), printed at destruction
  // MODEL.md section 7. spark: the weights come converted (DeviceWeights, same mode) and every
  // MoE row runs spark_moe.h's FP4-activation path; strict runs exactly as without the field.
  PrecisionMode precision_mode = PrecisionMode::kStrict;
  // Records each sparse row's attended tokens (selection_trace.h): only tests set one. Every step
  // then runs eagerly and waits for each sparse pass's selection.
  SelectionTrace* selection_trace = nullptr;
  // A negative control built in on purpose (engine_fault.h): only tests set one. The CUDA runner
  // takes kIndexerTieFlipped (dsa_select) and kMoeClampDropped (the experts' SwiGLU); it refuses
  // kFp8ScaleOffByOneExponent, whose latents and indexer keys it does not store alike.
  EngineFault fault = EngineFault::kNone;
};

class CudaModelRunner : public ModelRunner {
 public:
  CudaModelRunner(const ModelConfig& config, std::unique_ptr<DeviceWeights> weights,
                  const CudaRunnerOptions& options);
  ~CudaModelRunner() override;

  // Throws Error(kUnsupported) naming the field and the geometries served when the kernels cannot
  // serve this config (they are instantiated for the production per-layer geometry and for
  // tinyglm-micro's).
  static void check_config(const ModelConfig& config);
  // Device bytes of the caches and of the workspace for these options: the memory plan of
  // runner_factory sizes the KV pool with them before constructing anything.
  static size_t cache_bytes(const ModelConfig& config, const CudaRunnerOptions& options);
  static size_t state_bytes(const ModelConfig& config, int num_state_slots, int num_snapshots = 0,
                            int state_records = 0);
  static size_t workspace_bytes(const ModelConfig& config, const CudaRunnerOptions& options);

  const ModelConfig& config() const override { return config_; }
  CacheGeometry cache_geometry() const override {
    return {options_.num_blocks, options_.block_size, options_.num_state_slots,
            options_.num_snapshots, options_.state_records};
  }
  void forward(const ForwardBatch& batch, ForwardOutput& out) override;
  void forward_mtp(const ForwardBatch& batch, const std::vector<float>& hidden,
                   ForwardOutput& out) override;
  void submit(const ForwardBatch& batch, const StepSampling& sampling) override;
  void collect(StepResult& result) override;
  bool draws_sampled() const override { return true; }
  // A chaining verify step's main rows come to pinned memory at an event inside its graph,
  // before its MTP passes (cuda_speculation.cu).
  bool main_rows_early() const override { return chain_ != nullptr; }
  void collect_main(StepResult& main) override;
  // The MTP module over a prompt's rows inside its step (StepSampling::mtp_next,
  // cuda_speculation.cu: run_prompt_drafts), with RunnerShape::drafts.
  bool drafts_over_prompts() const override { return pinned_prompt_ != nullptr; }
  // Host copies for the prefix cache's disk tier (cuda_host_copies.cu).
  size_t host_block_bytes() const override;
  size_t host_snapshot_bytes() const override;
  void copy_block_to_host(int32_t block, std::byte* host) override;
  void copy_block_from_host(int32_t block, const std::byte* host) override;
  void copy_snapshot_to_host(int snapshot, std::byte* host) override;
  void copy_snapshot_from_host(int snapshot, const std::byte* host) override;

  bool set_eager(bool eager) override;
  StepGraphStats graph_stats() const override { return graph_stats_; }
  DraftStepTimes draft_step_times() const override { return draft_times_; }

  // The start-up line that bounds the graphs these options may capture (runner_factory logs it).
  static std::string graph_plan(const ModelConfig& config, const CudaRunnerOptions& options);

  const CudaRunnerOptions& options() const { return options_; }
  int graphs_captured() const { return int(graphs_.size()); }
  uint64_t graph_replays() const { return graph_replays_; }

 private:
  // A contiguous range of device memory that one host copy moves.
  struct DeviceRun {
    void* device;
    size_t bytes;
  };
  // The device runs of a block or a snapshot, in the order of their host layout; throws
  // Error(kInvalidArgument) for an index outside the pool.
  std::vector<DeviceRun> block_runs(int32_t block) const;
  std::vector<DeviceRun> snapshot_runs(int snapshot) const;
  // Copies `runs` to (or from) consecutive bytes of `host` on stream_, then waits for the stream.
  void copy_runs(const std::vector<DeviceRun>& runs, std::byte* host, bool to_host);
  static RunnerShape runner_shape(const ModelConfig& config, const CudaRunnerOptions& options);
  RunnerShape shape() const;  // runner_shape of this runner's config and options
  // Runs the loaded step up to the head reduction (h in ws_.y): a step graph or eager launches;
  // `batch`'s snapshot restores and record resumes before it and its saves after it, on stream_.
  void run_step(const ForwardBatch& batch);
  void reset_fresh_slots();
  // Copies whole KDA slots: snapshot -> slot for every restore_snapshot of `batch` (restore), or
  // slot -> snapshot for every save_snapshot.
  void copy_snapshots(const ForwardBatch& batch, bool restore);
  // Speculative decoding (cuda_speculation.cu). Copies each slice's KDA state record
  // `resume_record` into its slot, every KDA layer (before the step's rows, after the restores).
  void resume_records(const ForwardBatch& batch);
  // The loaded step's logit rows of h [T, D] (the head-reduced state) to the host.
  void hidden_to_host(const float* h, std::vector<float>& hidden);
  // The loaded step from the embedding to the head reduction (h in ws_.y), on stream_.
  void run_layers();
  // Blocks read ws_.normed / ws_.normed_bf16 (the block's pre-norm output) and write `out`.
  void kda_block(int kda_index, const KdaWeights& w, float* out);
  void mla_block(int cache_layer, const MlaWeights& w, float* out);
  void trace_selection(int cache_layer, int first_row, int rows);  // options_.selection_trace
  void mla_attend(int cache_layer, const MlaWeights& w, int row0, int rows, int seq_index,
                  bool decode, float* out);
  void ffn_block(const LayerWeights& w, int layer, float* out);
  // Spark's MoE (spark_moe.h) over every row of the step, in pieces of kDecodeMaxRows.
  void spark_moe_block(const LayerWeights& w, int layer, float* out);
  // The step's logit rows of h [T, D]: hidden states and logits (after `norm`) to the host.
  void head_to_host(const float* h, const float* norm, ForwardOutput& out);
  // The MTP module (MODEL.md section 6) over the loaded step's rows: row r on token tokens[r]
  // (device, step order) and the main model's state h[r] ([T, D], read only); its output state
  // lands in ws_.X ([T, D]), which it returns. With head_norm (the drafts' passes), its last
  // residual add goes into the head's norm, one launch: ws_.head_rows / ws_.head_bf16 =
  // rms_norm(z; head_norm), the bits of the add and then rms_norm_rows (norms.h).
  float* mtp_module(const int32_t* tokens, const float* h, const float* head_norm = nullptr);
  // Its two parts, for the launches that write its input themselves (the verify rows' greedy
  // picks; the draft chain's begin and advance): what the input is made from and where it goes
  // (ws_.mtp_cat), and the module from that input on, over the loaded step's rows.
  MtpEntry mtp_entry() const;
  float* mtp_layers(const float* head_norm);
  // Drafts inside a verify step (cuda_speculation.cu, StepSampling::draft_on_picks): whether the
  // loaded step qualifies (every row a decode row and a logit row, none picked by a draw, at most
  // kDecodeMaxRows); the launches (the main head over every row, the greedy picks, the MTP module
  // on them, its head), run after run_layers and captured with it; their results reach the host
  // through main_rows_to_host and drafts_to_host below.
  bool drafts_fit(const StepSampling& sampling) const;
  void run_draft_rows();
  // The chained passes after them (draft_chain.h, StepSampling::draft_chain): planned at
  // submission (their rows loaded into chain_step_, their buckets set; chain_.passes() is 0 when
  // the step runs none), launched at the end of run_draft_rows with chain_step_ as the step.
  void plan_chain(const ForwardBatch& batch, const StepSampling& sampling);
  int chain_passes() const { return chain_ ? chain_->passes() : 0; }  // of the planned step
  void run_chain_passes();
  // The main rows' copies to pinned memory and main_ready_, at the end of the main head (inside
  // the step's graph, on a branch that run_draft_rows joins at its end); queues the rest's copies
  // for q.parity after the step (chains, or the MTP rows where the step runs none), without
  // waiting.
  void main_rows_to_host();
  struct QueuedStep;
  // StepSampling::mtp_next, after the step's head (eager, as a prompt's steps are): the module
  // over every row on its next token (a logit row's pick where mtp_next says -1) from the
  // layers' states in ws_.y, then its logits and states at the logit rows into q (synchronising,
  // as a prompt step's head does), with the token each of those rows took.
  void run_prompt_drafts(const StepSampling& sampling, QueuedStep& q);
  void drafts_to_host(QueuedStep& q);
  // Waits for q's main rows and moves them into q (logit order), once: before the next step's
  // graph can overwrite them.
  void take_main_rows(QueuedStep& q);
  // Moves q's main rows (taken) into `result`'s tokens, logits, hidden and draft_tokens.
  void hand_main_rows(QueuedStep& q, StepResult& result);
  // StepSampling::chain_from: the rows take the previous step's chain tokens on the device.
  void take_chain_tokens(const StepSampling& sampling, int rows);
  // Patches the loaded step's tokens on the device from `picks` at source(r) for each of its
  // `rows` rows (-1: none), staged through `pinned` into `device`; `copied` is recorded after the
  // copy and waited for before `pinned` is written again (cuda_step_pipeline.cu). token_from and
  // chain_from both take this way.
  template <typename Source>
  void patch_tokens(int rows, Source source, int32_t* pinned, DeviceBuffer& device,
                    cudaEvent_t copied, const int32_t* picks);
  // collect() of a step with draft rows.
  void collect_drafts(QueuedStep& q, StepResult& result);
  // A pipelined step's head: logits of every logit row, their picks into picks_ (greedy, or with
  // `draws` the seeded draws of ws_.draws) and then the pinned picks of `parity`; with `logits`,
  // the logits to the host too (synchronising).
  void head_picks(int parity, std::vector<float>* logits, bool draws);
  // What a captured step's launches depend on (cuda_step_graphs.cu): the rows of each KDA group
  // (one group for a plain decode step, one per wave for a verify step), the attention's length
  // bucket, and whether the step keeps KDA records after / before its rows.
  struct GraphKey {
    std::vector<int> groups;
    int dense = 0;  // dense decode rows: the step's first rows (step_layout.h)
    int bucket = 0;
    int pool_bucket = 0;  // 0: no sparse row
    bool records_after = false, records_before = false;
    bool drafts = false;  // the draft rows after the layers (run_draft_rows)
    bool mtp = false;     // the MTP module alone: a chained pass of forward_mtp over decode rows
    // The chained passes after the draft rows (run_chain_passes; 0: none), their rows (the
    // groups alone do not fix them: a two-row slice across the dense/sparse edge and two one-row
    // slices have the same groups), dense count and buckets.
    int chain = 0, chain_rows = 0, chain_dense = 0, chain_bucket = 0, chain_pool_bucket = 0;
    // A verify step's KDA slices and their longest (kda_verify_slices' launch shape, which the
    // groups alone do not fix either).
    int slices = 0, longest_slice = 0;
    bool verify() const { return groups.size() > 1 || records_after || records_before; }
    bool operator<(const GraphKey& o) const;
  };
  struct StepGraph {
    cudaGraphExec_t exec = nullptr;
    size_t first_mark = 0;           // profile marks before its capture (profiling on)
    std::vector<const char*> parts;  // the parts it marked
  };
  // The loaded step's key, or none when it runs eagerly (graphs off, prompt rows, more than
  // kDecodeMaxRows rows). `mtp`: the key of forward_mtp's module over the loaded rows.
  std::optional<GraphKey> graph_key(bool mtp) const;
  // Launches the loaded step's graph (the layers and any draft rows; with `mtp`, the MTP module
  // on the hidden states at mtp_input()), capturing it first when new; false (nothing launched)
  // when it runs eagerly: no key, or a new verify or MTP shape beyond max_verify_graphs.
  bool launch_graph(bool mtp = false);
  // Where forward_mtp puts the hidden states it hands the module (a fixed place per row count).
  float* mtp_input() const;

  ModelConfig config_;
  std::unique_ptr<DeviceWeights> weights_;
  CudaRunnerOptions options_;
  cudaStream_t stream_ = nullptr;
  // A decode step's shared experts run beside its routed ones (moe_shared_expert_beside); a
  // verify step's main rows go to the host beside its MTP passes (main_rows_to_host). Made with
  // stream_, after the options are checked.
  std::optional<StreamBranch> side_, copies_;
  Gemm gemm_;
  std::unique_ptr<StepInputs> step_;
  DeviceBuffer ws_buffer_, cache_buffer_;
  Workspace ws_{};
  Caches caches_{};
  float* pinned_logits_ = nullptr;  // [kLogitChunk, vocab]
  float* pinned_hidden_ = nullptr;  // [kLogitChunk, D]
  // Each MoE layer's experts as [2W, D] gate/up and [D, W] down operands: host lists for the
  // prefill path, device pointer arrays for the decode kernel.
  struct ExpertTable {
    std::vector<const uint16_t*> gate_up, down;  // BF16 experts (null for quantized ones)
    const uint16_t* const* device_gate_up = nullptr;
    const uint16_t* const* device_down = nullptr;
    std::optional<MoeQuantTable> quant;   // quantized routed experts (moe_quant_experts.h)
    const float* spark_scales = nullptr;  // spark: [2E] device, s_gu then s_down (spark_moe.h)
  };
  // The routed experts' arguments every MoE path shares (MoeExpertArgs, MoePrefillArgs) for rows
  // [row0, row0 + rows) of the step, and the decode kernels' workspace (decode_args).
  template <typename Args>
  void fill_expert_args(Args& a, const SwiGluWeights* shared, int64_t row0, int64_t rows,
                        float* out) const;
  MoeExpertArgs decode_args(const ExpertTable& table, const SwiGluWeights* shared, int64_t row0,
                            int64_t rows, float* out) const;
  std::map<int, ExpertTable> experts_;  // by layer index (the MTP layer included)
  DeviceBuffer expert_pointers_;
  DeviceBuffer expert_dequant_;  // prefill's BF16 scratch with quantized experts
  DeviceBuffer spark_scales_;    // spark: every MoE layer's [2E] activation scales
  std::map<GraphKey, StepGraph> graphs_;
  bool eager_ = false;  // set_eager(true)
  StepGraphStats graph_stats_;
  uint64_t graph_replays_ = 0;
  StepProfiler profile_;   // options_.profile_steps: device time by part (graphs included)
  int length_bucket_ = 0;  // the max_len the current decode step's attention is launched with
  // The pools the current step's sparse decode rows are scored over, a bound (dsa_pool_scores
  // with positions): a power of two, so graphs serve every length up to it.
  int pool_bucket_ = 0;
  int sparse_decode_graphs_ = 0;   // plain decode graphs with sparse rows (max_sparse_graphs)
  int sparse_pool_bucket() const;  // pool_bucket_ for the loaded step
  void set_eager_buckets();        // length_bucket_ and pool_bucket_ of an eager step
  void set_chain_buckets();        // chain_bucket_ and chain_pool_bucket_ of the planned chain

  // Pipelined steps: at most two queued; picks of queued step i land in pinned_picks_[parity].
  struct QueuedStep {
    int parity = 0;
    int64_t logit_rows = 0;
    std::vector<float> logits;  // filled at submission when a row is not picked here
    std::vector<float> hidden;  // [logit_rows, D], filled with `logits` (the drafter's input)
    // A step with draft rows: the greedy picks its MTP rows took (also the step's picks), with
    // logits and hidden, filled by take_main_rows.
    std::vector<int32_t> draft_tokens;
    // A prompt step's MTP rows at its logit rows (run_prompt_drafts; with draft_tokens).
    std::vector<float> draft_logits, draft_hidden;
    // A step with draft rows: its logit rows in step order, the chain's width (0: none), and
    // whether its main rows were moved into this step already (take_main_rows).
    bool drafts = false, main_taken = false;
    std::vector<int32_t> logit_order;
    int chain_width = 0;
    int follows = -1;  // the parity of the drafting step queued before it, if any (idle_seconds)
  };
  bool step_drafts_ = false;  // the step being launched runs its draft rows
  // Timing of the steps with draft rows (draft_step_times): the submit's start on the host, and
  // events around the step's device work (recorded where sampling asks for drafts).
  std::chrono::steady_clock::time_point submit_began_, step_loaded_, chain_planned_, step_launched_;
  // When collect_main handed the main rows of the step just submitted over (DraftStepTimes::
  // between_seconds); cleared by the next drafting step's submit.
  std::optional<std::chrono::steady_clock::time_point> main_handed_;
  // Per parity: a queued step's events stay until its collect, while the next step records its own.
  cudaEvent_t step_began_[2] = {}, step_ended_[2] = {};
  cudaEvent_t run_began_[2] = {}, run_ended_[2] = {};  // around run_step
  cudaEvent_t graph_began_ = nullptr;  // the layers' start (a drafting step graph's first node)
  cudaEvent_t main_ready_ = nullptr;   // its main rows in pinned memory (a node of its graph)
  DraftStepTimes draft_times_;
  std::unique_ptr<StepInputs> chain_step_;  // the chained passes' rows (RunnerShape::drafts)
  std::unique_ptr<DraftChain> chain_;
  int chain_bucket_ = 0, chain_pool_bucket_ = 0;  // their length and pool buckets
  // [kDecodeMaxRows] rows (RunnerShape::drafts, else null). Main rows (main_rows_to_host): the
  // step's picks here, its logits and states in pinned_logits_ and pinned_hidden_. MTP logits and
  // states of a step without a chain: per parity.
  float* pinned_draft_logits_[2] = {};
  float* pinned_draft_hidden_[2] = {};
  int32_t* pinned_draft_picks_ = nullptr;
  // run_prompt_drafts' inputs (RunnerShape::drafts, else null): [2, max_rows] in step order, each
  // row's next token then the logit row whose pick replaces it (-1: none); on the device, the
  // module's input tokens and that map.
  int32_t* pinned_prompt_ = nullptr;
  DeviceBuffer prompt_tokens_, prompt_from_;  // int32 [max_rows] each
  DeviceBuffer chain_from_;                   // int32 [max_rows]: take_chain_tokens' sources
  int32_t* pinned_chain_from_ = nullptr;      // [max_rows]
  cudaEvent_t chain_from_copied_ = nullptr;
  std::deque<QueuedStep> queued_;
  int next_parity_ = 0;
  DeviceBuffer picks_, token_from_;  // int32 [max_rows] each
  DeviceBuffer greedy_keys_;         // sample_greedy's scratch: [kLogitChunk] zeros
  int32_t* pinned_picks_[2] = {nullptr, nullptr};
  cudaEvent_t picks_copied_[2] = {nullptr, nullptr};
  int32_t* pinned_from_ = nullptr;  // [max_rows] token_from in step order
  cudaEvent_t from_copied_ = nullptr;
  SampleParams* pinned_draws_ = nullptr;  // [max_rows] the step's RowDraws, for ws_.draws
  cudaEvent_t draws_copied_ = nullptr;
  TokenMaskUpload masks_;  // the submitted step's grammar masks (structured output)
};

}  // namespace sparkglm::cuda
