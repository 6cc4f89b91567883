// The feed-forward block of the CUDA runner (MODEL.md section 5): the dense SwiGLU of the first
// layers, or the MoE (FP32 router, top-k choice, routed experts, shared expert, combine). Decode
// rows stream each chosen expert's weights per token; prompt rows are grouped by expert on the
// device (moe_experts_prefill: grouped GEMMs, no host sync). A layer whose routed experts are
// quantized (FP4-Local) takes the same two paths over its MoeQuantTable: moe_quant_experts.h
// dequantizes in registers, moe_prefill_quant.h through a bounded BF16 scratch. In spark mode the
// MoE runs spark_moe.h's path instead (FP4-rounded routed activations), every row alike.
#include <algorithm>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/backend/cuda/linear_f32.h"
#include "engine/backend/cuda/moe_experts.h"
#include "engine/backend/cuda/moe_prefill.h"
#include "engine/backend/cuda/moe_prefill_quant.h"
#include "engine/backend/cuda/moe_quant_experts.h"
#include "engine/backend/cuda/moe_router.h"
#include "engine/backend/cuda/projection.h"
#include "engine/backend/cuda/runner_kernels.h"
#include "engine/backend/cuda/spark_moe.h"

namespace sparkglm::cuda {

template <typename Args>
void CudaModelRunner::fill_expert_args(Args& a, const SwiGluWeights* shared, int64_t row0,
                                       int64_t rows, float* out) const {
  const int64_t D = config_.hidden_size;
  const int k = config_.num_experts_per_tok;
  a.tokens = rows;
  a.top_k = k;
  a.n_experts = config_.n_routed_experts;
  a.hidden = D;
  a.width = config_.moe_intermediate_size;
  a.clamp_limit =  // <= 0: no clamp
      options_.fault == EngineFault::kMoeClampDropped ? 0.0f : config_.swiglu_limit;
  a.x = ws_.normed_bf16 + row0 * D;
  a.experts = ws_.experts + row0 * k;
  a.weights = ws_.expert_weights + row0 * k;
  a.shared_gate_up = shared ? shared->gate.bf16() : nullptr;
  a.shared_down = shared ? shared->down.bf16() : nullptr;
  a.out = out + row0 * D;
}

MoeExpertArgs CudaModelRunner::decode_args(const ExpertTable& table, const SwiGluWeights* shared,
                                           int64_t row0, int64_t rows, float* out) const {
  MoeExpertArgs a;
  fill_expert_args(a, shared, row0, rows, out);
  a.gate_up = table.device_gate_up;
  a.down = table.device_down;
  a.h = ws_.moe_h;
  a.y = ws_.moe_y;
  a.groups = ws_.moe_groups;
  a.shared_gu = ws_.moe_shared_gu;
  a.shared_h = ws_.moe_shared_h;
  a.shared_y = ws_.moe_shared_y;
  return a;
}

void CudaModelRunner::ffn_block(const LayerWeights& w, int layer, float* out) {
  const int64_t T = step_->rows(), D = config_.hidden_size;
  if (w.dense_mlp) {
    const int64_t W = w.mlp.gate.rows;  // gate rows then up rows: one [2W, D] product
    const DequantWorkspace dq = weights_->dequant_workspace();
    const int64_t dec = step_->decode_rows();
    project_step(gemm_, dq, fused({&w.mlp.gate, &w.mlp.up}, "dense MLP gate/up"), ws_.normed_bf16,
                 dec, T, ws_.gu, stream_);  // [T, 2W]
    swiglu_rows(ws_.gu, T, W, 0.0f, ws_.mlp_h, stream_);
    project_step(gemm_, dq, w.mlp.down, ws_.mlp_h, dec, T, out, stream_);  // [T, D]
    return;
  }
  const int E = config_.n_routed_experts, k = config_.num_experts_per_tok;
  const bool spark = options_.precision_mode == PrecisionMode::kSpark;
  const ExpertTable& table = experts_.at(layer);
  // Quantized routed experts (FP4-Local): the same paths with weights dequantized on the fly.
  const MoeQuantExperts* quant = table.quant ? &table.quant->experts() : nullptr;
  const SwiGluWeights* shared = w.moe.shared ? &*w.moe.shared : nullptr;
  const int64_t dec = step_->decode_rows();
  // The BF16 shared expert of a step's decode rows (one piece) runs beside the router and the
  // routed experts, from here to the combine.
  const bool beside = shared && !spark && !quant && dec > 0 && dec <= kDecodeMaxRows;
  if (beside) moe_shared_expert_beside(decode_args(table, shared, 0, dec, out), stream_, *side_);
  profile_.mark("moe.router", stream_);
  linear_f32(ws_.normed, T, w.moe.router, E, D, ws_.router_logits, stream_);
  route_experts(ws_.router_logits, w.moe.score_bias, T, E, k, config_.norm_topk_prob,
                config_.routed_scaling_factor, ws_.experts, ws_.expert_weights, stream_);
  profile_.mark("moe.experts", stream_);
  if (spark) {
    spark_moe_block(w, layer, out);
    return;
  }
  // Decode rows (the first `dec`) stream their experts' weights per token, in pieces of at most
  // kDecodeMaxRows; prompt rows go through the grouped GEMMs. Each path's per-token sums do not
  // depend on the other tokens (moe_experts.h, grouped_gemm.h), and a token's path depends on what
  // it is, not on how many rows share its step.
  for (int64_t r0 = 0; r0 < dec; r0 += kDecodeMaxRows) {
    MoeExpertArgs a =
        decode_args(table, shared, r0, std::min<int64_t>(kDecodeMaxRows, dec - r0), out);
    if (beside) a.shared_done = side_->closed();
    if (quant)
      moe_experts_decode_quantized(a, *quant, stream_);
    else
      moe_experts_decode(a, stream_);
  }
  if (T == dec) return;
  MoePrefillArgs a;
  fill_expert_args(a, shared, dec, T - dec, out);
  a.gate_up = table.gate_up;
  a.down = table.down;
  a.device_gate_up = table.device_gate_up;
  a.device_down = table.device_down;
  a.workspace = ws_.moe_prefill_ws;
  a.quant = quant;
  a.quant_scratch = expert_dequant_.data();
  a.quant_chunk = kMoePrefillQuantChunk;
  moe_experts_prefill(a, gemm_, stream_);
}

void CudaModelRunner::spark_moe_block(const LayerWeights& w, int layer, float* out) {
  const int64_t T = step_->rows(), D = config_.hidden_size;
  const ExpertTable& table = experts_.at(layer);
  const SwiGluWeights* shared = w.moe.shared ? &*w.moe.shared : nullptr;
  // Decode and prompt rows alike, in pieces of kDecodeMaxRows: a row's path does not depend on
  // what it is, and its bits not on the rows beside it (spark_moe.h).
  for (int64_t r0 = 0; r0 < T; r0 += kDecodeMaxRows) {
    SparkMoeArgs s;
    // moe_experts_spark sets the shared expert's BF16 pointers itself (its weights are NVFP4).
    s.a = decode_args(table, shared, r0, std::min<int64_t>(kDecodeMaxRows, T - r0), out);
    s.quant = table.quant ? &table.quant->experts() : nullptr;
    s.x_f32 = ws_.normed + r0 * D;
    s.scales = table.spark_scales;
    s.shared_gate = shared ? &shared->gate : nullptr;
    s.shared_up = shared ? &shared->up : nullptr;
    s.shared_down = shared ? &shared->down : nullptr;
    s.xq = ws_.spark_xq;
    s.gu = ws_.spark_gu;
    moe_experts_spark(s, stream_);
  }
}

}  // namespace sparkglm::cuda
