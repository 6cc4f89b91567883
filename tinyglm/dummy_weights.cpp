#include "tinyglm/dummy_weights.h"

#include "engine/model/tensor_layout.h"
#include "tinyglm/dummy_hash.h"

namespace sparkglm {

std::string dummy_identity(uint64_t seed) {
  return "dummy:seed=" + std::to_string(seed);
}

std::shared_ptr<OwnedTensors> make_dummy_weights(const ModelConfig& config, uint64_t seed,
                                                 ThreadPool& pool) {
  auto out = std::make_shared<OwnedTensors>(dummy_identity(seed));
  for (const TensorSpec& spec : checkpoint_tensors(config)) {
    std::byte* bytes = out->add(spec.name, spec.dtype, spec.shape);
    const uint64_t key = dummy::tensor_key(seed, spec.name);
    const float center = spec.init.center, half = spec.init.half_width;
    const int64_t n = spec.numel();
    if (spec.dtype == DType::kBF16) {
      auto* dst = reinterpret_cast<uint16_t*>(bytes);
      pool.parallel_for(n, 1 << 16, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i)
          dst[i] = f32_to_bf16(dummy::value(key, uint64_t(i), center, half));
      });
    } else {
      auto* dst = reinterpret_cast<float*>(bytes);
      pool.parallel_for(n, 1 << 16, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) dst[i] = dummy::value(key, uint64_t(i), center, half);
      });
    }
  }
  return out;
}

}  // namespace sparkglm
