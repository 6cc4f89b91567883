#include "engine/backend/cpu/expert_router.h"

#include <cassert>
#include <cmath>
#include <vector>

#include "engine/backend/cpu/ops.h"

namespace sparkglm::cpu {

void select_experts(const ModelConfig& c, const float* router_logits, const float* bias,
                    ExpertChoice* out) {
  const int E = c.n_routed_experts;
  const int k = c.num_experts_per_tok;
  assert(k > 0 && k <= E);

  // An insertion list kept sorted by (key descending, index ascending). Experts arrive in index
  // order, so a newcomer goes after every entry whose key is >= its own: that is the tie rule.
  std::vector<int32_t> idx(size_t(k), -1);    // [k]
  std::vector<float> key(size_t(k), 0.0f);    // [k]
  std::vector<float> score(size_t(k), 0.0f);  // [k] sigmoid scores of the chosen
  int filled = 0;
  for (int e = 0; e < E; ++e) {
    const float s = sigmoid(router_logits[e]);
    const float v = bias ? s + bias[e] : s;
    if (std::isnan(v)) continue;
    if (filled == k && !(v > key[size_t(k - 1)])) continue;
    int pos = filled < k ? filled : k - 1;  // the slot it takes before shifting into place
    while (pos > 0 && key[size_t(pos - 1)] < v) {
      idx[size_t(pos)] = idx[size_t(pos - 1)];
      key[size_t(pos)] = key[size_t(pos - 1)];
      score[size_t(pos)] = score[size_t(pos - 1)];
      --pos;
    }
    idx[size_t(pos)] = e;
    key[size_t(pos)] = v;
    score[size_t(pos)] = s;
    if (filled < k) ++filled;
  }

  float sum = 0.0f;
  for (int r = 0; r < filled; ++r) sum += score[size_t(r)];
  const float scale = c.routed_scaling_factor;
  for (int r = 0; r < k; ++r) {
    if (r >= filled) {
      out[r] = {-1, 0.0f};
      continue;
    }
    const float s = score[size_t(r)];
    // A zero sum only happens when every chosen sigmoid underflowed; 0/0 would poison the token.
    const float w = c.norm_topk_prob ? (sum > 0.0f ? s / sum * scale : 0.0f) : s * scale;
    out[r] = {idx[size_t(r)], w};
  }
}

}  // namespace sparkglm::cpu
