#include "engine/backend/cpu/mlp.h"

#include <algorithm>
#include <cassert>
#include <vector>

#include "engine/backend/cpu/linear.h"
#include "engine/backend/cpu/ops.h"
#include "engine/model/weight_quantizer.h"

namespace sparkglm::cpu {

void swiglu_forward(const SwiGluWeights& w, const float* x, int64_t T, float* out, ThreadPool& pool,
                    float clamp_limit, const Fp4ActivationScales* fp4) {
  const int64_t D = w.gate.cols;
  const int64_t W = w.gate.rows;
  assert(w.up.rows == W && w.up.cols == D && w.down.rows == D && w.down.cols == W);
  if (T <= 0) return;
  std::vector<float> xq;  // [T, D]: x through NVFP4, spark mode only
  if (fp4) {
    xq.assign(x, x + T * D);
    for (int64_t t = 0; t < T; ++t) round_trip_nvfp4(xq.data() + t * D, D, fp4->gate_up);
    x = xq.data();
  }
  std::vector<float> g(size_t(T * W));  // [T, W]
  std::vector<float> u(size_t(T * W));  // [T, W]
  linear(x, T, w.gate, g.data(), pool);
  linear(x, T, w.up, u.data(), pool);
  const float L = clamp_limit;
  if (L > 0.0f) {
    // std::min/std::clamp keep a NaN input NaN, so a poisoned activation is not hidden.
    for (size_t i = 0; i < g.size(); ++i) g[i] = silu(std::min(g[i], L)) * std::clamp(u[i], -L, L);
  } else {
    for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * u[i];
  }
  if (fp4)
    for (int64_t t = 0; t < T; ++t) round_trip_nvfp4(g.data() + t * W, W, fp4->down);
  linear(g.data(), T, w.down, out, pool);
}

}  // namespace sparkglm::cpu
