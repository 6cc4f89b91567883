#include "engine/backend/capacity_plan.h"

#include <climits>

#include "engine/core/error.h"
#include "engine/model/tensor_layout.h"
#include "engine/model/weight_footprint.h"

namespace sparkglm {
namespace {

constexpr int64_t kMlaScoreRows = 256;  // query rows of one MLA score chunk
constexpr int64_t kLogitRows = 64;      // logit rows of one LM-head chunk

bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// Whether weight_shard.h splits the tensor across the ranks (see capacity_plan.h).
bool is_sharded(const ModelConfig& c, const std::string& name) {
  if (name == "lm_head.weight" || name.find(".mlp.experts.") != std::string::npos ||
      name.find(".mlp.shared_experts.") != std::string::npos)
    return true;
  constexpr std::string_view kLayers = "model.layers.";
  if (name.rfind(kLayers, 0) != 0) return false;
  const int layer = std::stoi(name.substr(kLayers.size()));
  const std::string rest = name.substr(name.find('.', kLayers.size()) + 1);
  if (rest.rfind("mlp.", 0) == 0) return ends_with(rest, "_proj.weight");  // the dense MLP
  if (rest.rfind("self_attn.indexer.", 0) == 0) return false;
  const bool mla = layer == c.mtp_layer() || c.layer_kind(layer) == LayerKind::kSparseAttention;
  static const char* const kKda[] = {"q_proj.weight",   "k_proj.weight",   "v_proj.weight",
                                     "f_b_proj.weight", "g_b_proj.weight", "b_proj.weight",
                                     "o_proj.weight",   "q_conv1d.weight", "k_conv1d.weight",
                                     "v_conv1d.weight", "A_log",           "dt_bias"};
  static const char* const kMla[] = {"q_b_proj.weight", "kv_b_proj.weight", "o_proj.weight"};
  for (const char* s : mla ? std::vector<const char*>(std::begin(kMla), std::end(kMla))
                           : std::vector<const char*>(std::begin(kKda), std::end(kKda)))
    if (rest == std::string("self_attn.") + s) return true;
  return false;
}

size_t workspace_estimate(const ModelConfig& c, int64_t rows) {
  const int64_t d = c.hidden_size, hk = int64_t(c.kda.num_heads) * c.kda.head_dim;
  const int64_t h = c.num_attention_heads;
  const int64_t per_row = 2 * int64_t(c.hc_mult) * d + 4 * d + 10 * hk +
                          h * (c.qk_nope_head_dim + 2 * int64_t(c.kv_lora_rank) + c.v_head_dim) +
                          int64_t(c.index_n_heads) * c.index_head_dim + c.n_routed_experts +
                          2 * int64_t(c.num_experts_per_tok) * c.moe_intermediate_size +
                          2 * int64_t(c.moe_intermediate_size) * c.n_shared_experts +
                          2 * int64_t(c.intermediate_size);
  const int64_t attended = c.index_topk + c.index_kpool - 1;
  return size_t(4 * (rows * per_row + kMlaScoreRows * h * attended + kLogitRows * c.vocab_size));
}

}  // namespace

DeviceKind device_kind(std::string_view name) {
  if (name == "h200") return {"H200", size_t(141'000'000'000), false};
  if (name == "gb10") return {"GB10", size_t(128'000'000'000), true};
  throw Error(ErrorKind::kInvalidArgument,
              "--gpu " + std::string(name) + ": expected h200 or gb10");
}

CapacityPlan plan_capacity(const ModelConfig& c, const CapacityRequest& r) {
  if (r.devices < 1)
    throw Error(ErrorKind::kInvalidArgument,
                "--gpus " + std::to_string(r.devices) + ": expected at least 1");
  CapacityPlan p;
  int64_t replicated = 0, sharded = 0;
  for (const TensorSpec& spec : checkpoint_tensors(c)) {
    const int64_t bytes = stored_bytes(spec, weight_format(c, spec, r.format));
    p.model_bytes += bytes;
    (is_sharded(c, spec.name) ? sharded : replicated) += bytes;
  }
  const int64_t n = r.devices;
  p.demand.weights = size_t(replicated + (sharded + n - 1) / n);
  p.demand.state = size_t(int64_t(r.max_num_seqs + r.num_snapshots) *
                          ((weight_footprint(c).kda_state_bytes + n - 1) / n));
  p.demand.workspace = workspace_estimate(c, r.max_tokens_per_step);
  p.demand.reserve = kCudaReserveBytes;
  const int latent_ranks = r.kv_shard ? r.devices : 1;
  p.demand.per_block = LatentCache::bytes_per_block(c, r.block_size, r.kv_dtype, latent_ranks);
  p.kv_shard_gain = double(LatentCache::bytes_per_block(c, r.block_size, r.kv_dtype)) /
                    double(p.demand.per_block);
  try {
    p.pool = plan_kv_pool({r.device.name, r.device.memory, r.device.memory}, p.demand,
                          r.gpu_memory_utilization, 0, r.block_size, INT_MAX / r.block_size,
                          /*can_cut_depth=*/true);
    p.fits = true;
    p.kv_tokens = int64_t(p.pool.num_blocks) * r.block_size;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kCapacity) throw;
    p.why_not = e.what();
  }
  return p;
}

int deepest_fitting_depth(ModelConfig config, const CapacityRequest& request) {
  const int full = config.num_hidden_layers;
  for (int layers = full / 4 * 4; layers >= 4; layers -= 4) {
    config.set_depth(layers);
    if (plan_capacity(config, request).fits) return layers;
  }
  return 0;
}

}  // namespace sparkglm
