#pragma once
// Small element-wise and row operators of MODEL.md, in FP32. Each works on one row at a time, so a
// row's result never depends on other rows.
#include <cmath>
#include <cstdint>

namespace sparkglm::cpu {

inline float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
inline float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

// y = x * rsqrt(mean(x^2) + eps) * w   (w may be null: no weight). y may alias x.
void rms_norm(const float* x, const float* w, float eps, int64_t n, float* y);
// y = (x - mean) * rsqrt(var + eps) * w + b   (population variance). y may alias x.
void layer_norm(const float* x, const float* w, const float* b, float eps, int64_t n, float* y);
// x /= sqrt(sum(x^2) + eps), in place.
void l2_normalize(float* x, int64_t n, float eps);
// In-place softmax over n values (max-subtracted).
void softmax(float* x, int64_t n);

}  // namespace sparkglm::cpu
