#pragma once
// The checkpoint's tensors for a config: every name, shape and stored dtype the loader expects,
// and the initialisation rule the dummy-weight generator applies (docs/checkpoint.md lists them).
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/model/config.h"

namespace sparkglm {

// Dummy value of element i: center + half_width * s_i, s_i uniform in [-1, 1)
// (tinyglm/dummy_hash.h).
struct DummyInit {
  float center = 0.0f;
  float half_width = 0.0f;
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype;     // what tinyglm writes: BF16 for projections and embeddings, F32 otherwise
  DummyInit init;  // variance 1/fan_in for projections, ones for norms, small biases
  int64_t numel() const;
};

// In checkpoint order: globals, then layer 0..L-1, then the MTP layer.
std::vector<TensorSpec> checkpoint_tensors(const ModelConfig& c);

// "model.layers.{layer}." : the prefix of one layer's tensors.
std::string layer_prefix(int layer);

}  // namespace sparkglm
