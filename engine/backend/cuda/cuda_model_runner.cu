#include "engine/backend/cuda/cuda_model_runner.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/dsa_indexer.h"
#include "engine/backend/cuda/embedding.h"
#include "engine/backend/cuda/kda.h"
#include "engine/backend/cuda/mhc.h"
#include "engine/backend/cuda/mla_decode.h"
#include "engine/backend/cuda/moe_prefill_quant.h"
#include "engine/backend/cuda/moe_quant_table.h"
#include "engine/backend/cuda/norms.h"
#include "engine/backend/cuda/projection.h"
#include "engine/backend/cuda/runner_kernels.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

// The per-layer geometries the kernels are instantiated for (mhc.h, kda.h, mla_decode.h,
// dsa_indexer.h): production's (glm-5.3-flash and tinyglm) and tinyglm-micro's. Each kernel is a
// template with exactly these two instantiations, dispatched from the config at run time, so the
// production code is what it was before micro was served; everything else is refused by name.
struct KernelGeometry {
  const char* name;
  int hidden_size;         // kHcWidth / kHcMicroWidth
  int kda_head_dim;        // kKdaHeadDim / kKdaMicroHeadDim
  int kv_lora_rank;        // kMlaLatentDim / kMlaMicroLatentDim
  int index_head_dim;      // kIndexDim / kIndexMicroDim
  int heads_multiple;      // MLA heads per tensor-core tile; micro pads its heads to 16
  int moe_width_multiple;  // the decode MoE kernels' k blocks (moe_experts.cu)
};

constexpr KernelGeometry kProduction{"production", kHcWidth, kKdaHeadDim, kMlaLatentDim,
                                     kIndexDim,    16,       512};
constexpr KernelGeometry kMicro{
    "tinyglm-micro", kHcMicroWidth, kKdaMicroHeadDim, kMlaMicroLatentDim, kIndexMicroDim, 1, 32};

std::string describe(const KernelGeometry& g) {
  return std::string(g.name) + " (hidden_size " + std::to_string(g.hidden_size) +
         ", linear_attn_config.head_dim " + std::to_string(g.kda_head_dim) + ", kv_lora_rank " +
         std::to_string(g.kv_lora_rank) + ", index_head_dim " + std::to_string(g.index_head_dim) +
         ")";
}

}  // namespace

void CudaModelRunner::check_config(const ModelConfig& c) {
  const std::string served =
      "; the CUDA kernels serve two per-layer geometries, " + describe(kProduction) + " and " +
      describe(kMicro) +
      ", with hc_mult 4, short_conv_kernel_size 4, index_kpool 4 and at most "
      "one shared expert; serve this model with --device cpu";
  const KernelGeometry& g = c.hidden_size == kMicro.hidden_size ? kMicro : kProduction;
  auto need = [&](bool ok, const std::string& field, int64_t value, const std::string& expected) {
    if (!ok)
      throw Error(ErrorKind::kUnsupported, "the CUDA backend needs " + field + " " + expected +
                                               " (got " + std::to_string(value) + ")" + served);
  };
  need(
      c.hidden_size == kProduction.hidden_size || c.hidden_size == kMicro.hidden_size,
      "hidden_size", c.hidden_size,
      "= " + std::to_string(kProduction.hidden_size) + " or " + std::to_string(kMicro.hidden_size));
  const std::string at = " at hidden_size " + std::to_string(g.hidden_size);
  need(c.hc_mult == kHcStreams, "hc_mult", c.hc_mult, "= 4");
  need(c.kda.head_dim == g.kda_head_dim, "linear_attn_config.head_dim", c.kda.head_dim,
       "= " + std::to_string(g.kda_head_dim) + at);
  need(c.kda.short_conv_kernel_size == kKdaTaps, "short_conv_kernel_size",
       c.kda.short_conv_kernel_size, "= 4");
  need(c.kv_lora_rank == g.kv_lora_rank, "kv_lora_rank", c.kv_lora_rank,
       "= " + std::to_string(g.kv_lora_rank) + at);
  need(c.num_attention_heads % g.heads_multiple == 0, "num_attention_heads", c.num_attention_heads,
       "a multiple of " + std::to_string(g.heads_multiple) + at);
  need(c.qk_nope_head_dim % 4 == 0, "qk_nope_head_dim", c.qk_nope_head_dim, "a multiple of 4");
  need(c.index_head_dim == g.index_head_dim, "index_head_dim", c.index_head_dim,
       "= " + std::to_string(g.index_head_dim) + at);
  need(c.index_kpool == kIndexKpool, "index_kpool", c.index_kpool, "= 4");
  need(c.n_shared_experts <= 1, "n_shared_experts", c.n_shared_experts, "<= 1");
  need(c.moe_intermediate_size % g.moe_width_multiple == 0, "moe_intermediate_size",
       c.moe_intermediate_size, "a multiple of " + std::to_string(g.moe_width_multiple) + at);
}

RunnerShape CudaModelRunner::runner_shape(const ModelConfig& c, const CudaRunnerOptions& o) {
  RunnerShape s;
  s.rows = o.max_rows;
  s.max_seqs = o.num_state_slots;
  s.table_stride = (o.max_seq_len + o.block_size - 1) / o.block_size;
  s.max_pools = std::min(kIndexMaxPools, std::max(1, o.max_seq_len / c.index_kpool));
  s.attend_max = c.index_topk_pools() * c.index_kpool + c.index_kpool - 1;
  s.spark = o.precision_mode == PrecisionMode::kSpark;
  s.drafts = c.mtp_layer() >= 0 && (o.state_records > 0 || o.decode_slice_rows > 1);
  return s;
}

RunnerShape CudaModelRunner::shape() const {
  return runner_shape(config_, options_);
}

size_t CudaModelRunner::cache_bytes(const ModelConfig& config, const CudaRunnerOptions& o) {
  Carve count(nullptr);
  Caches::carve(count, config, o.num_blocks, o.block_size, o.kv_dtype, o.num_state_slots,
                o.num_snapshots, o.state_records);
  return count.used();
}

size_t CudaModelRunner::state_bytes(const ModelConfig& config, int num_state_slots,
                                    int num_snapshots, int state_records) {
  Carve with(nullptr), without(nullptr);
  Caches::carve(with, config, 0, 16, KvDtype::kBF16, num_state_slots, num_snapshots, state_records);
  Caches::carve(without, config, 0, 16, KvDtype::kBF16, 0);
  return with.used() - without.used();
}

size_t CudaModelRunner::workspace_bytes(const ModelConfig& config, const CudaRunnerOptions& o) {
  Carve count(nullptr);
  Workspace::carve(count, config, runner_shape(config, o));
  return count.used();
}

CudaModelRunner::CudaModelRunner(const ModelConfig& config, std::unique_ptr<DeviceWeights> weights,
                                 const CudaRunnerOptions& options)
    : config_(config),
      weights_(std::move(weights)),
      options_(options),
      profile_(options.profile_steps) {
  check_config(config_);
  if (options_.kv_dtype == KvDtype::kF32)
    throw Error(ErrorKind::kUnsupported,
                "--kv-cache-dtype f32: the CUDA backend keeps bf16 or fp8_g128 latents");
  if (options_.fault == EngineFault::kFp8ScaleOffByOneExponent)
    throw Error(ErrorKind::kUnsupported,
                "engine fault fp8 scale off by one exponent: the CUDA runner keeps its indexer "
                "keys in f32, so it cannot break them as the CPU engine does");
  check_latent_geometry(config_.kv_lora_rank, options_.kv_dtype == KvDtype::kFp8G128
                                                  ? LatentFormat::kFp8G128
                                                  : LatentFormat::kBF16);
  if (config_.hidden_size != kHcWidth)
    for (const LayerWeights& l : weights_->weights().layers)
      if (!l.dense_mlp && MoeQuantTable::quantized(l.moe))
        throw Error(ErrorKind::kUnsupported,
                    "quantized routed experts (FP4-Local) at hidden_size " +
                        std::to_string(config_.hidden_size) +
                        ": the quantized MoE kernels serve the production geometry (hidden_size " +
                        std::to_string(kHcWidth) + ") only; serve this checkpoint in bf16");
  if (options_.max_seq_len > kIndexMaxPools * config_.index_kpool)
    throw Error(ErrorKind::kUnsupported, "max-seq-len " + std::to_string(options_.max_seq_len) +
                                             ": the CUDA indexer selects over at most " +
                                             std::to_string(kIndexMaxPools * config_.index_kpool) +
                                             " tokens");
  if (options_.block_size % kIndexKpool != 0)
    throw Error(ErrorKind::kUnsupported,
                "--block-size " + std::to_string(options_.block_size) +
                    ": the CUDA backend keeps each block's pooled indexer keys in the block, so "
                    "the block size must be a multiple of " +
                    std::to_string(kIndexKpool));
  if (options_.state_records < 0 || options_.decode_slice_rows < 1)
    throw Error(ErrorKind::kInvalidArgument,
                "CUDA runner: state_records " + std::to_string(options_.state_records) +
                    " and decode_slice_rows " + std::to_string(options_.decode_slice_rows) +
                    " (expected >= 0 and >= 1)");
  if (options_.max_verify_graphs < 0 || options_.max_sparse_graphs < 0)
    throw Error(ErrorKind::kInvalidArgument,
                "CUDA runner: max_verify_graphs " + std::to_string(options_.max_verify_graphs) +
                    " and max_sparse_graphs " + std::to_string(options_.max_sparse_graphs) +
                    " (expected >= 0)");
  graph_stats_.built_with_graphs = options_.graphs;
  SPARKGLM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  side_.emplace();
  copies_.emplace();
  const RunnerShape s = shape();
  // Every decode row is a sequence of the step's layout (step_layout.h): a slot's verify slice
  // takes up to decode_slice_rows of them.
  step_ = std::make_unique<StepInputs>(
      StepCapacity{options_.max_rows, options_.num_state_slots * options_.decode_slice_rows,
                   s.table_stride},
      options_.block_size, config_.index_topk_pools(), config_.index_kpool);

  ws_buffer_ = DeviceBuffer(workspace_bytes(config_, options_));
  Carve wc(ws_buffer_.data());
  ws_ = Workspace::carve(wc, config_, s);
  cache_buffer_ = DeviceBuffer(cache_bytes(config_, options_));
  Carve cc(cache_buffer_.data());
  caches_ = Caches::carve(cc, config_, options_.num_blocks, options_.block_size, options_.kv_dtype,
                          options_.num_state_slots, options_.num_snapshots, options_.state_records);
  SPARKGLM_CUDA_CHECK(cudaMemset(cache_buffer_.data(), 0, cache_buffer_.bytes()));
  SPARKGLM_CUDA_CHECK(cudaMallocHost(
      &pinned_logits_, sizeof(float) * size_t(kLogitChunk) * size_t(config_.vocab_size)));
  SPARKGLM_CUDA_CHECK(
      cudaMallocHost(&pinned_hidden_, sizeof(float) * size_t(kLogitChunk) * config_.hidden_size));
  const size_t row_ints = size_t(options_.max_rows) * sizeof(int32_t);
  picks_ = DeviceBuffer(row_ints);
  token_from_ = DeviceBuffer(row_ints);
  greedy_keys_ = DeviceBuffer(size_t(kLogitChunk) * sizeof(unsigned long long));
  SPARKGLM_CUDA_CHECK(cudaMemset(greedy_keys_.data(), 0, greedy_keys_.bytes()));
  SPARKGLM_CUDA_CHECK(cudaMallocHost(&pinned_from_, row_ints));
  SPARKGLM_CUDA_CHECK(cudaEventCreateWithFlags(&from_copied_, cudaEventDisableTiming));
  SPARKGLM_CUDA_CHECK(
      cudaMallocHost(&pinned_draws_, size_t(options_.max_rows) * sizeof(SampleParams)));
  SPARKGLM_CUDA_CHECK(cudaEventCreateWithFlags(&draws_copied_, cudaEventDisableTiming));
  SPARKGLM_CUDA_CHECK(cudaEventCreate(&graph_began_));
  SPARKGLM_CUDA_CHECK(cudaEventCreate(&main_ready_));  // timed: DraftStepTimes::main_seconds
  for (int p = 0; p < 2; ++p) {
    SPARKGLM_CUDA_CHECK(cudaMallocHost(&pinned_picks_[p], row_ints));
    SPARKGLM_CUDA_CHECK(cudaEventCreateWithFlags(&picks_copied_[p], cudaEventDisableTiming));
    SPARKGLM_CUDA_CHECK(cudaEventCreate(&step_began_[p]));
    SPARKGLM_CUDA_CHECK(cudaEventCreate(&step_ended_[p]));
    SPARKGLM_CUDA_CHECK(cudaEventCreate(&run_began_[p]));
    SPARKGLM_CUDA_CHECK(cudaEventCreate(&run_ended_[p]));
  }
  if (s.drafts) {
    const size_t rows = size_t(kDecodeMaxRows);
    for (int p = 0; p < 2; ++p) {
      SPARKGLM_CUDA_CHECK(cudaMallocHost(&pinned_draft_logits_[p],
                                         sizeof(float) * rows * size_t(config_.vocab_size)));
      SPARKGLM_CUDA_CHECK(cudaMallocHost(&pinned_draft_hidden_[p],
                                         sizeof(float) * rows * size_t(config_.hidden_size)));
    }
    SPARKGLM_CUDA_CHECK(cudaMallocHost(&pinned_draft_picks_, sizeof(int32_t) * rows));
    chain_from_ = DeviceBuffer(row_ints);
    SPARKGLM_CUDA_CHECK(cudaMallocHost(&pinned_chain_from_, row_ints));
    prompt_tokens_ = DeviceBuffer(row_ints);
    prompt_from_ = DeviceBuffer(row_ints);
    SPARKGLM_CUDA_CHECK(cudaMallocHost(&pinned_prompt_, 2 * row_ints));
    SPARKGLM_CUDA_CHECK(cudaEventCreateWithFlags(&chain_from_copied_, cudaEventDisableTiming));
    chain_step_ = std::make_unique<StepInputs>(
        StepCapacity{kDecodeMaxRows, kDecodeMaxRows, s.table_stride}, options_.block_size,
        config_.index_topk_pools(), config_.index_kpool);
    chain_ = std::make_unique<DraftChain>(ws_, kChainStride - 1, config_.hidden_size,
                                          config_.vocab_size);
  }

  // Expert operand tables. The arena keeps each gate_proj directly before its up_proj, which is
  // what lets one [2W, D] product compute both.
  const ModelWeights& mw = weights_->weights();
  auto fused = [&](const SwiGluWeights& e) {
    const size_t half = size_t(e.gate.rows) * size_t(e.gate.cols) * 2;
    SPARKGLM_ASSERT(
        static_cast<const char*>(e.up.data) == static_cast<const char*>(e.gate.data) + half,
        "device weights: up_proj must follow gate_proj");
    return e.gate.bf16();
  };
  std::vector<const LayerWeights*> moe_layers;
  std::vector<int> moe_index;
  for (int l = 0; l < config_.num_hidden_layers; ++l)
    if (!mw.layers[size_t(l)].dense_mlp) {
      moe_layers.push_back(&mw.layers[size_t(l)]);
      moe_index.push_back(l);
    }
  if (mw.mtp) {
    moe_layers.push_back(&mw.mtp->layer);
    moe_index.push_back(config_.mtp_layer());
  }
  const int64_t E = config_.n_routed_experts;
  // Spark reads its shared experts (NVFP4 after conversion) through quantized_gemv, whatever the
  // routed experts' format.
  const bool spark = options_.precision_mode == PrecisionMode::kSpark;
  std::vector<const uint16_t*> all;
  // Quantized routed experts (FP4-Local) go through MoeQuantTable instead; their BF16 slots stay
  // null.
  bool any_quant = false;
  for (const LayerWeights* l : moe_layers) {
    const bool quant = MoeQuantTable::quantized(l->moe);
    any_quant = any_quant || quant;
    for (const auto& e : l->moe.experts) all.push_back(quant ? nullptr : fused(e));
    for (const auto& e : l->moe.experts) all.push_back(quant ? nullptr : e.down.bf16());
    if (l->moe.shared && !quant && !spark) {
      SPARKGLM_ASSERT(!l->moe.shared->gate.quantized() && !l->moe.shared->down.quantized(),
                      "device weights: a quantized shared expert needs quantized routed experts");
      fused(*l->moe.shared);
    }
  }
  for (const auto& l : mw.layers)
    if (l.dense_mlp) cuda::fused({&l.mlp.gate, &l.mlp.up}, "dense MLP gate/up");
  if (!all.empty()) {
    expert_pointers_ = DeviceBuffer(all.size() * sizeof(void*));
    expert_pointers_.copy_from_host(all.data(), all.size() * sizeof(void*));
  }
  const auto* dev = static_cast<const uint16_t* const*>(expert_pointers_.data());
  for (size_t i = 0; i < moe_layers.size(); ++i) {
    ExpertTable t;
    t.gate_up.assign(all.begin() + int64_t(i) * 2 * E, all.begin() + int64_t(i) * 2 * E + E);
    t.down.assign(all.begin() + int64_t(i) * 2 * E + E, all.begin() + int64_t(i + 1) * 2 * E);
    t.device_gate_up = dev + int64_t(i) * 2 * E;
    t.device_down = dev + int64_t(i) * 2 * E + E;
    if (MoeQuantTable::quantized(moe_layers[i]->moe))
      t.quant = MoeQuantTable::build(moe_layers[i]->moe, config_.hidden_size,
                                     config_.moe_intermediate_size);
    experts_[moe_index[i]] = std::move(t);
  }
  if (spark) {  // [layer][2E]: s_gu then s_down, from DeviceWeights' fp4_activations
    std::vector<float> scales;
    for (size_t i = 0; i < moe_layers.size(); ++i) {
      const auto& a = moe_layers[i]->moe.fp4_activations;
      SPARKGLM_ASSERT(int64_t(a.size()) == E,
                      "spark: the device weights carry no activation scales (not converted)");
      for (const Fp4ActivationScales& x : a) scales.push_back(x.gate_up);
      for (const Fp4ActivationScales& x : a) scales.push_back(x.down);
    }
    if (!scales.empty()) {
      spark_scales_ = DeviceBuffer(scales.size() * sizeof(float));
      spark_scales_.copy_from_host(scales.data(), scales.size() * sizeof(float));
    }
    for (size_t i = 0; i < moe_layers.size(); ++i)
      experts_.at(moe_index[i]).spark_scales =
          static_cast<const float*>(spark_scales_.data()) + int64_t(i) * 2 * E;
  }
  if (any_quant && !spark)  // spark never takes the grouped-GEMM prefill path
    expert_dequant_ = DeviceBuffer(moe_prefill_quant_scratch_bytes(
        kMoePrefillQuantChunk, config_.hidden_size, config_.moe_intermediate_size));
}

CudaModelRunner::~CudaModelRunner() {
  for (auto& [key, graph] : graphs_) cudaGraphExecDestroy(graph.exec);
  cudaFreeHost(pinned_logits_);
  cudaFreeHost(pinned_hidden_);
  cudaFreeHost(pinned_from_);
  cudaEventDestroy(from_copied_);
  cudaFreeHost(pinned_draws_);
  cudaEventDestroy(draws_copied_);
  cudaEventDestroy(graph_began_);
  cudaEventDestroy(main_ready_);
  cudaFreeHost(pinned_draft_picks_);
  cudaFreeHost(pinned_chain_from_);
  cudaFreeHost(pinned_prompt_);
  if (chain_from_copied_) cudaEventDestroy(chain_from_copied_);  // a runner without drafts has none
  for (int p = 0; p < 2; ++p) {
    cudaFreeHost(pinned_picks_[p]);
    cudaEventDestroy(picks_copied_[p]);
    cudaEventDestroy(step_began_[p]);
    cudaEventDestroy(step_ended_[p]);
    cudaEventDestroy(run_began_[p]);
    cudaEventDestroy(run_ended_[p]);
    cudaFreeHost(pinned_draft_logits_[p]);
    cudaFreeHost(pinned_draft_hidden_[p]);
  }
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaModelRunner::reset_fresh_slots() {
  const int64_t H = config_.kda.num_heads, K = config_.kda.head_dim;
  const int64_t state = H * K * K, conv = 3 * (config_.kda.short_conv_kernel_size - 1) * H * K;
  const int64_t slots = options_.num_state_slots;
  for (const StepSequence& s : step_->seqs()) {
    if (s.start != 0) continue;
    for (int l = 0; l < config_.num_kda_layers(); ++l) {
      SPARKGLM_CUDA_CHECK(cudaMemsetAsync(caches_.kda_state + (l * slots + s.slot) * state, 0,
                                          size_t(state) * sizeof(float), stream_));
      SPARKGLM_CUDA_CHECK(cudaMemsetAsync(caches_.kda_conv + (l * slots + s.slot) * conv, 0,
                                          size_t(conv) * sizeof(float), stream_));
    }
  }
}

void CudaModelRunner::copy_snapshots(const ForwardBatch& batch, bool restore) {
  const int64_t H = config_.kda.num_heads, K = config_.kda.head_dim;
  const int64_t state = H * K * K, conv = 3 * (config_.kda.short_conv_kernel_size - 1) * H * K;
  const int64_t slots = options_.num_state_slots, layers = config_.num_kda_layers();
  for (const SequenceSlice& s : batch.seqs) {
    const int snap = restore ? s.restore_snapshot : s.save_snapshot;
    if (snap < 0) continue;
    // A slot's layers are `slots` entries apart; a snapshot's are contiguous: one 2D copy each.
    auto copy = [&](float* slot_base, float* snap_base, int64_t floats) {
      float* in_slots = slot_base + int64_t(s.state_slot) * floats;  // layer 0 of the slot
      float* in_snap = snap_base + int64_t(snap) * layers * floats;  // layer 0 of the snapshot
      const size_t row = size_t(floats) * sizeof(float), slot_pitch = row * size_t(slots);
      if (restore) {
        SPARKGLM_CUDA_CHECK(cudaMemcpy2DAsync(in_slots, slot_pitch, in_snap, row, row,
                                              size_t(layers), cudaMemcpyDeviceToDevice, stream_));
      } else {
        SPARKGLM_CUDA_CHECK(cudaMemcpy2DAsync(in_snap, row, in_slots, slot_pitch, row,
                                              size_t(layers), cudaMemcpyDeviceToDevice, stream_));
      }
    };
    copy(caches_.kda_state, caches_.snapshot_state, state);
    copy(caches_.kda_conv, caches_.snapshot_conv, conv);
  }
}

void CudaModelRunner::run_layers() {
  const ModelWeights& mw = weights_->weights();
  const int64_t T = step_->rows(), D = config_.hidden_size;
  const HcConstants hc{config_.rms_norm_eps, config_.hc_eps, config_.hc_sinkhorn_iters,
                       config_.hidden_size};
  const float eps = config_.rms_norm_eps;
  profile_.mark("embed", stream_);
  embed_tokens(mw.embed.bf16(), config_.vocab_size, D, step_->tokens(), T, kHcStreams, ws_.X,
               stream_);
  // A decode-sized step folds each hc_post into the pre after it and each pre's norm into it
  // (mhc.h: HcFold; the same bits), the residual alternating between ws_.X and ws_.X_next.
  const bool fold = T <= kHcFoldRows;
  float* X = ws_.X;
  bool post_ahead = false;  // block_out, post and comb await their hc_post
  auto pre = [&](const HcSite& site, const float* norm_w) {
    if (!fold) {
      if (post_ahead) hc_post(ws_.block_out, ws_.post, ws_.comb, X, T, stream_, int(D));
      hc_pre(hc, site.fn, site.base, site.scale, X, T, ws_.y, ws_.post, ws_.comb, stream_,
             ws_.hc_partials);
      rms_norm_rows(ws_.y, norm_w, eps, T, D, ws_.normed, ws_.normed_bf16, stream_);
      return;
    }
    HcFold f;
    f.norm_w = norm_w;
    f.norm_eps = eps;
    f.normed = ws_.normed;
    f.normed_bf16 = ws_.normed_bf16;
    float* next = X == ws_.X ? ws_.X_next : ws_.X;
    if (post_ahead) f.b = ws_.block_out, f.post = ws_.post, f.comb = ws_.comb, f.X_next = next;
    hc_pre_folded(hc, site.fn, site.base, site.scale, X, T, ws_.y, ws_.post, ws_.comb,
                  ws_.hc_partials, f, stream_);
    if (post_ahead) X = next;
  };
  for (int layer = 0; layer < config_.num_hidden_layers; ++layer) {
    const LayerWeights& w = mw.layers[size_t(layer)];
    profile_.mark("mhc+norm", stream_);
    pre(w.hc_attn, w.input_norm);
    if (w.kind == LayerKind::kLinearAttention) {
      kda_block(config_.kind_index(layer), w.kda, ws_.block_out);
    } else {
      mla_block(config_.kind_index(layer), w.mla, ws_.block_out);
    }
    post_ahead = true;
    profile_.mark("mhc+norm", stream_);
    pre(w.hc_ffn, w.post_attn_norm);
    if (w.dense_mlp) profile_.mark("dense_mlp", stream_);
    ffn_block(w, layer, ws_.block_out);
  }
  profile_.mark("mhc+norm", stream_);
  if (!fold) {
    hc_post(ws_.block_out, ws_.post, ws_.comb, X, T, stream_, int(D));
    hc_head(hc, mw.hc_head.fn, mw.hc_head.base, mw.hc_head.scale, X, T, ws_.y, stream_,
            ws_.hc_partials);
    return;
  }
  HcFold f;
  f.b = ws_.block_out, f.post = ws_.post, f.comb = ws_.comb;
  f.X_next = X == ws_.X ? ws_.X_next : ws_.X;
  hc_head_folded(hc, mw.hc_head.fn, mw.hc_head.base, mw.hc_head.scale, X, T, ws_.y, ws_.hc_partials,
                 f, stream_);
}

void CudaModelRunner::head_to_host(const float* h, const float* norm, ForwardOutput& out) {
  const int64_t n = int64_t(step_->logit_rows().size()), D = config_.hidden_size;
  const int64_t V = config_.vocab_size;
  out.logits.resize(size_t(n * V));
  out.hidden.resize(size_t(n * D));
  profile_.mark("head", stream_);
  for (int64_t c0 = 0; c0 < n; c0 += kLogitChunk) {
    const int64_t m = std::min<int64_t>(kLogitChunk, n - c0);
    gather_rows(h, step_->logit_rows_device() + c0, m, D, ws_.head_rows, stream_);
    SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(pinned_hidden_, ws_.head_rows, size_t(m * D) * 4,
                                        cudaMemcpyDeviceToHost, stream_));
    rms_norm_rows(ws_.head_rows, norm, config_.rms_norm_eps, m, D, ws_.head_rows, ws_.head_bf16,
                  stream_);
    const Linear& lm = weights_->weights().lm_head;
    project_decode(gemm_, lm, ws_.head_bf16, m, ws_.logits, stream_);  // any logit row
    SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(pinned_logits_, ws_.logits, size_t(m * V) * 4,
                                        cudaMemcpyDeviceToHost, stream_));
    // The step ends with the last chunk: "head" spans every chunk (and the host copies between
    // them, which the device waits for), not only the first.
    if (c0 + m == n)
      profile_.end_step(stream_, step_->decode_rows() == step_->rows() ? "decode" : "prefill");
    SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::memcpy(out.hidden.data() + c0 * D, pinned_hidden_, size_t(m * D) * 4);
    std::memcpy(out.logits.data() + c0 * V, pinned_logits_, size_t(m * V) * 4);
  }
  if (n == 0) profile_.end_step(stream_, "prefill");  // no logit row: the step ends here
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaModelRunner::forward(const ForwardBatch& batch, ForwardOutput& out) {
  SPARKGLM_ASSERT(queued_.empty(), "CudaModelRunner::forward with pipelined steps queued");
  batch.validate(config_, options_.block_size, options_.num_blocks, options_.num_state_slots,
                 options_.num_snapshots, options_.state_records);
  if (batch.num_rows() == 0) {
    out.logits.clear();
    out.hidden.clear();
    return;
  }
  step_->load(batch, stream_);
  run_step(batch);
  head_to_host(ws_.y, weights_->weights().final_norm, out);
}

void CudaModelRunner::run_step(const ForwardBatch& batch) {
  reset_fresh_slots();
  copy_snapshots(batch, /*restore=*/true);
  resume_records(batch);
  if (!launch_graph(/*mtp=*/false)) {
    if (step_->layout().speculative()) ++graph_stats_.verify_eager_steps;
    set_eager_buckets();
    if (step_drafts_) SPARKGLM_CUDA_CHECK(cudaEventRecord(graph_began_, stream_));  // eager
    run_layers();
    if (step_drafts_) run_draft_rows();
  }
  copy_snapshots(batch, /*restore=*/false);
}

void CudaModelRunner::forward_mtp(const ForwardBatch& batch, const std::vector<float>& hidden,
                                  ForwardOutput& out) {
  const ModelWeights& mw = weights_->weights();
  SPARKGLM_ASSERT(mw.mtp.has_value(), "forward_mtp on a model without an MTP module");
  batch.validate(config_, options_.block_size, options_.num_blocks, options_.num_state_slots,
                 options_.num_snapshots);
  const int64_t T = batch.num_rows(), D = config_.hidden_size;
  SPARKGLM_ASSERT(int64_t(hidden.size()) == T * D,
                  "forward_mtp: hidden must be [rows, hidden_size]");
  if (T == 0) {
    out.logits.clear();
    out.hidden.clear();
    return;
  }
  step_->load(batch, stream_);
  // The hidden states in step order, where mtp_module normalises them (in place).
  float* h = mtp_input();
  std::vector<float> ordered(size_t(T * D));  // hidden in step order
  for (int64_t r = 0; r < T; ++r)
    std::memcpy(&ordered[size_t(r * D)], &hidden[size_t(step_->batch_row(int(r)) * D)],
                size_t(D) * 4);
  SPARKGLM_CUDA_CHECK(
      cudaMemcpyAsync(h, ordered.data(), size_t(T * D) * 4, cudaMemcpyHostToDevice, stream_));
  // A chained pass (decode rows) replays its graph; the module's output is z = ws_.X either way.
  float* z = ws_.X;
  if (!launch_graph(/*mtp=*/true)) {
    set_eager_buckets();
    z = mtp_module(step_->tokens(), h);
  }
  head_to_host(z, mw.mtp->head_norm, out);
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `ordered` is pageable: keep it alive
}

float* CudaModelRunner::mtp_input() const {
  return ws_.X + 2 * step_->rows() * config_.hidden_size;
}

float* CudaModelRunner::mtp_module(const int32_t* tokens, const float* h, const float* head_norm) {
  mtp_entry_bf16(mtp_entry(), tokens, h, step_->rows(), stream_);
  return mtp_layers(head_norm);
}

MtpEntry CudaModelRunner::mtp_entry() const {
  const ModelWeights& mw = weights_->weights();
  const MtpWeights& m = *mw.mtp;
  // z and the BF16 concatenation [enorm(embed(token)); hnorm(h)] share the residual-stream
  // buffer (ws_.mtp_cat). The input takes one launch: every width the runner serves (mhc.h: 256
  // and 4096) is one mtp_entry_bf16 row.
  return {mw.embed.bf16(),      config_.vocab_size,  m.enorm,    m.hnorm,
          config_.rms_norm_eps, config_.hidden_size, ws_.mtp_cat};
}

float* CudaModelRunner::mtp_layers(const float* head_norm) {
  const ModelWeights& mw = weights_->weights();
  const MtpWeights& m = *mw.mtp;
  const int64_t T = step_->rows(), D = config_.hidden_size;
  const float eps = config_.rms_norm_eps;
  float* z = ws_.X;
  project_step(gemm_, weights_->dequant_workspace(), m.eh_proj, ws_.mtp_cat, step_->decode_rows(),
               T, z, stream_);  // [T, D]

  rms_norm_rows(z, m.layer.input_norm, eps, T, D, ws_.normed, ws_.normed_bf16, stream_);
  mla_block(config_.kind_index(config_.mtp_layer()), m.layer.mla, ws_.block_out);
  add_rms_norm_rows(z, ws_.block_out, m.layer.post_attn_norm, eps, T, D, ws_.normed,
                    ws_.normed_bf16, stream_);
  ffn_block(m.layer, config_.mtp_layer(), ws_.block_out);
  if (head_norm != nullptr) {
    add_rms_norm_rows(z, ws_.block_out, head_norm, eps, T, D, ws_.head_rows, ws_.head_bf16,
                      stream_);
  } else {
    add_in_place(z, ws_.block_out, T * D, stream_);
  }
  return z;
}

}  // namespace sparkglm::cuda
