#include "engine/backend/cpu/ops.h"

#include <algorithm>

namespace sparkglm::cpu {

void rms_norm(const float* x, const float* w, float eps, int64_t n, float* y) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss / float(n) + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * r * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * r;
  }
}

void layer_norm(const float* x, const float* w, const float* b, float eps, int64_t n, float* y) {
  float mean = 0.0f;
  for (int64_t i = 0; i < n; ++i) mean += x[i];
  mean /= float(n);
  float var = 0.0f;
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  const float r = 1.0f / std::sqrt(var / float(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * r * w[i] + b[i];
}

void l2_normalize(float* x, int64_t n, float eps) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss + eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= r;
}

void softmax(float* x, int64_t n) {
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace sparkglm::cpu
