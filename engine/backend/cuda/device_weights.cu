#include "engine/backend/cuda/device_weights.h"

#include <map>
#include <vector>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/dummy_weights.h"
#include "engine/core/error.h"
#include "engine/model/tensor_layout.h"
#include "tinyglm/dummy_hash.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm::cuda {

namespace {

constexpr size_t kAlign = 256;

size_t aligned(size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

size_t spec_bytes(const TensorSpec& s) {
  return size_t(s.numel()) * size_t(dtype_size(s.dtype));
}

// Tensors that live in the arena, found by name: what ModelWeights::bind reads (shapes, dtypes,
// pointers) without ever touching the device bytes behind them.
class ArenaTensors : public TensorSource {
 public:
  explicit ArenaTensors(std::string identity) : identity_(std::move(identity)) {}
  void add(const TensorSpec& spec, std::byte* device_data) {
    tensors_[spec.name] = TensorView{spec.dtype, spec.shape, device_data, spec_bytes(spec)};
  }
  std::optional<TensorView> find(const std::string& name) const override {
    const auto it = tensors_.find(name);
    if (it == tensors_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& [name, view] : tensors_) out.push_back(name);
    return out;
  }
  std::string identity() const override { return identity_; }

 private:
  std::map<std::string, TensorView> tensors_;
  std::string identity_;
};

}  // namespace

size_t DeviceWeights::arena_bytes(const ModelConfig& config) {
  size_t total = 0;
  for (const TensorSpec& s : checkpoint_tensors(config)) total += aligned(spec_bytes(s));
  return total;
}

std::unique_ptr<DeviceWeights> DeviceWeights::generate(const ModelConfig& config, uint64_t seed) {
  auto out = std::unique_ptr<DeviceWeights>(new DeviceWeights());
  out->arena_ = DeviceBuffer(arena_bytes(config));
  out->identity_ = dummy_identity(seed);
  auto source = std::make_shared<ArenaTensors>(out->identity_);
  auto* base = static_cast<std::byte*>(out->arena_.data());
  size_t offset = 0;
  for (const TensorSpec& s : checkpoint_tensors(config)) {
    std::byte* at = base + offset;
    const uint64_t key = dummy::tensor_key(seed, s.name);
    if (s.dtype == DType::kBF16) {
      fill_dummy_bf16(reinterpret_cast<uint16_t*>(at), s.numel(), key, s.init.center,
                      s.init.half_width, nullptr);
    } else {
      SPARKGLM_ASSERT(s.dtype == DType::kF32, "dummy tensors are BF16 or FP32");
      fill_dummy_f32(reinterpret_cast<float*>(at), s.numel(), key, s.init.center, s.init.half_width,
                     nullptr);
    }
    source->add(s, at);
    offset += aligned(spec_bytes(s));
  }
  SPARKGLM_CUDA_CHECK(cudaDeviceSynchronize());
  out->weights_ = ModelWeights::bind(config, source);
  return out;
}

std::unique_ptr<DeviceWeights> DeviceWeights::upload(const ModelConfig& config,
                                                     const TensorSource& host) {
  auto out = std::unique_ptr<DeviceWeights>(new DeviceWeights());
  out->identity_ = host.identity();
  const std::vector<TensorSpec> specs = checkpoint_tensors(config);
  // Every tensor is checked before a byte moves: a refused checkpoint allocates nothing.
  for (const TensorSpec& s : specs) {
    const auto view = host.find(s.name);
    if (!view) throw Error(ErrorKind::kInvalidCheckpoint, "tensor `" + s.name + "`: missing");
    if (view->dtype != s.dtype || view->shape != s.shape)
      throw Error(ErrorKind::kUnsupported,
                  "tensor `" + s.name + "`: stored as " + std::string(dtype_name(view->dtype)) +
                      " " + shape_string(view->shape) + "; the CUDA backend loads " +
                      std::string(dtype_name(s.dtype)) + " " + shape_string(s.shape) +
                      " (quantized checkpoint formats are served on the CPU backend only)");
  }
  out->arena_ = DeviceBuffer(arena_bytes(config));
  auto source = std::make_shared<ArenaTensors>(out->identity_);
  auto* base = static_cast<std::byte*>(out->arena_.data());
  size_t offset = 0;
  for (const TensorSpec& s : specs) {
    const TensorView view = *host.find(s.name);
    SPARKGLM_CUDA_CHECK(cudaMemcpy(base + offset, view.data, view.nbytes, cudaMemcpyHostToDevice));
    source->add(s, base + offset);
    offset += aligned(spec_bytes(s));
  }
  out->weights_ = ModelWeights::bind(config, source);
  return out;
}

}  // namespace sparkglm::cuda
