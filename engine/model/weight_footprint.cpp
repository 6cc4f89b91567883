#include "engine/model/weight_footprint.h"

#include "engine/model/tensor_layout.h"

namespace sparkglm {

WeightFootprint weight_footprint(const ModelConfig& c, CheckpointFormat format) {
  WeightFootprint f;
  const std::string mtp = c.mtp_layer() >= 0 ? layer_prefix(c.mtp_layer()) : std::string("\x01");
  for (const TensorSpec& spec : checkpoint_tensors(c)) {
    const int64_t bytes = stored_bytes(spec, weight_format(c, spec, format));
    f.total_bytes += bytes;
    if (spec.name.rfind(mtp, 0) == 0) continue;
    if (spec.name == "model.embed_tokens.weight") {
      f.embedding_row_bytes = bytes / c.vocab_size;
      f.decode_weight_bytes += bytes / c.vocab_size;  // one row
    } else if (spec.name.find(".mlp.experts.") != std::string::npos) {
      f.routed_expert_bytes += bytes;
      f.active_params += spec.numel() * c.num_experts_per_tok / c.n_routed_experts;
    } else {
      f.non_expert_decode_bytes += bytes;
      f.decode_weight_bytes += bytes;
      f.active_params += spec.numel();
    }
  }
  // A token reads num_experts_per_tok of n_routed_experts experts (every expert the same size).
  f.decode_weight_bytes += f.routed_expert_bytes / c.n_routed_experts * c.num_experts_per_tok;
  const int64_t hk = int64_t(c.kda.num_heads) * c.kda.head_dim;
  f.kda_state_bytes = int64_t(c.num_kda_layers()) *
                      (hk * c.kda.head_dim + 3 * int64_t(c.kda.short_conv_kernel_size - 1) * hk) *
                      4;
  return f;
}

}  // namespace sparkglm
