#include "engine/backend/cpu/moe_layer.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <vector>

#include "engine/backend/cpu/expert_router.h"
#include "engine/backend/cpu/linear.h"
#include "engine/backend/cpu/mlp.h"

namespace sparkglm::cpu {

namespace {

// Tokens per pass: bounds the gathered buffers ([kChunk * k, D] twice) during long prefills.
// Chunking cannot change a token's result, since no arithmetic mixes tokens.
constexpr int64_t kChunk = 256;

// One pass over Tc <= kChunk tokens; experts are SwiGLUs clamped at clamp_limit (none when <= 0).
void moe_chunk(const ModelConfig& c, const MoeWeights& w, const float* x, int64_t Tc, float* out,
               ThreadPool& pool, int e0, int e1, float clamp_limit) {
  const int64_t D = c.hidden_size;
  const int E = c.n_routed_experts;
  const int k = c.num_experts_per_tok;

  // Router in FP32 (MODEL.md: "router in FP32").
  std::vector<float> logits(size_t(Tc * E));  // [Tc, E]
  const Linear router{DType::kF32, E, D, w.router};
  linear(x, Tc, router, logits.data(), pool);

  std::vector<ExpertChoice> choice(size_t(Tc * k));  // [Tc, k]
  pool.parallel_for(Tc, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t)
      select_experts(c, logits.data() + t * E, w.score_bias, choice.data() + t * k);
  });

  // Experts another rank runs are dropped here: their pairs keep no grouped row.
  for (ExpertChoice& ch : choice)
    if (ch.expert < e0 || ch.expert >= e1) ch.expert = -1;

  // Group the (token, rank) pairs by expert, in token order within an expert.
  std::vector<int64_t> start(size_t(E) + 1, 0);  // [E + 1] row offsets into the grouped buffers
  for (const ExpertChoice& ch : choice)
    if (ch.expert >= 0) ++start[size_t(ch.expert) + 1];
  for (int e = 0; e < E; ++e) start[size_t(e) + 1] += start[size_t(e)];
  const int64_t P = start[size_t(E)];
  std::vector<int64_t> slot(size_t(Tc * k), -1);  // [Tc, k] grouped row of each pair
  std::vector<float> xg(size_t(P * D));           // [P, D] gathered inputs
  std::vector<float> yg(size_t(P * D));           // [P, D] expert outputs
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);  // [E]
    for (int64_t t = 0; t < Tc; ++t)
      for (int r = 0; r < k; ++r) {
        const int32_t e = choice[size_t(t * k + r)].expert;
        if (e < 0) continue;
        const int64_t row = fill[size_t(e)]++;
        slot[size_t(t * k + r)] = row;
        std::memcpy(xg.data() + row * D, x + t * D, size_t(D) * sizeof(float));
      }
  }
  for (int e = 0; e < E; ++e) {
    const int64_t n = start[size_t(e) + 1] - start[size_t(e)];
    if (n == 0) continue;
    const int64_t off = start[size_t(e)] * D;
    const Fp4ActivationScales* fp4 =
        w.fp4_activations.empty() ? nullptr : &w.fp4_activations[size_t(e)];  // spark mode
    swiglu_forward(w.experts[size_t(e)], xg.data() + off, n, yg.data() + off, pool, clamp_limit,
                   fp4);
  }

  std::vector<float> ys;  // [Tc, D] shared expert output
  if (w.shared) {
    ys.resize(size_t(Tc * D));
    swiglu_forward(*w.shared, x, Tc, ys.data(), pool, clamp_limit);
  }

  // Fixed per-token order: ranks 0..k-1, then the shared expert.
  pool.parallel_for(Tc, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      float* o = out + t * D;
      std::fill(o, o + D, 0.0f);
      for (int r = 0; r < k; ++r) {
        const int64_t row = slot[size_t(t * k + r)];
        if (row < 0) continue;
        const float wr = choice[size_t(t * k + r)].weight;
        const float* y = yg.data() + row * D;
        for (int64_t d = 0; d < D; ++d) o[d] += wr * y[d];
      }
      if (w.shared) {
        const float* y = ys.data() + t * D;
        for (int64_t d = 0; d < D; ++d) o[d] += y[d];
      }
    }
  });
}

}  // namespace

void moe_forward(const ModelConfig& c, const MoeWeights& w, const float* x, int64_t T, float* out,
                 ThreadPool& pool, int expert_begin, int expert_end, EngineFault fault) {
  assert(int(w.experts.size()) == c.n_routed_experts);
  assert(w.router != nullptr);
  const float clamp_limit = fault == EngineFault::kMoeClampDropped ? 0.0f : c.swiglu_limit;
  for (int64_t t0 = 0; t0 < T; t0 += kChunk) {
    const int64_t Tc = std::min(kChunk, T - t0);
    moe_chunk(c, w, x + t0 * c.hidden_size, Tc, out + t0 * c.hidden_size, pool, expert_begin,
              expert_end < 0 ? c.n_routed_experts : expert_end, clamp_limit);
  }
}

}  // namespace sparkglm::cpu
