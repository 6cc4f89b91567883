#include "tinyglm/stored_weights.h"

#include <cstring>
#include <functional>

#include "engine/core/dtype.h"
#include "engine/model/tensor_layout.h"
#include "engine/model/weight_quantizer.h"

namespace sparkglm {
namespace {

std::string stem_of(const std::string& weight_name) {
  return weight_name.substr(0, weight_name.size() - std::string("weight").size());
}

template <typename T>
void copy_into(std::byte* dst, const std::vector<T>& v) {
  std::memcpy(dst, v.data(), v.size() * sizeof(T));
}

// Adds the stored tensors of one quantized projection (zeroed) and returns the job that fills them
// from the BF16 source; the adds are serial, the jobs run in parallel.
std::function<void()> add_quantized(OwnedTensors& out, std::vector<std::string>& order,
                                    const ModelConfig& config, const TensorSpec& spec,
                                    WeightFormat format, const TensorView& bf16) {
  const int64_t rows = spec.shape[0], cols = spec.shape[1];
  const std::string& name = spec.name;
  const std::string stem = stem_of(name);
  auto add = [&](const std::string& n, DType d, std::vector<int64_t> shape) {
    order.push_back(n);
    return out.add(n, d, std::move(shape));
  };
  auto dense = [bf16, rows, cols] {
    std::vector<float> w(size_t(rows * cols));
    const auto* src = reinterpret_cast<const uint16_t*>(bf16.data);
    for (size_t i = 0; i < w.size(); ++i) w[i] = bf16_to_f32(src[i]);
    return w;
  };
  if (format == WeightFormat::kNvfp4) {
    std::byte* packed = add(name, DType::kU8, {rows, cols / 2});
    std::byte* scale = add(stem + "weight_scale", DType::kF8E4M3, {rows, cols / 16});
    std::byte* scale_2 = add(stem + "weight_scale_2", DType::kF32, {});
    const float input_scale = routed_expert_input_scale(config, name);
    copy_into(add(stem + "input_scale", DType::kF32, {}), std::vector<float>{input_scale});
    return [=] {
      const Nvfp4Weight q = quantize_nvfp4(dense().data(), rows, cols, name);
      copy_into(packed, q.packed);
      copy_into(scale, q.scale);
      copy_into(scale_2, std::vector<float>{q.scale_2});
    };
  }
  if (format == WeightFormat::kMxfp8) {
    std::byte* values = add(name, DType::kF8E4M3, {rows, cols});
    std::byte* scale = add(stem + "weight_scale", DType::kF8E8M0, {rows, cols / 32});
    return [=] {
      const Mxfp8Weight q = quantize_mxfp8(dense().data(), rows, cols, name);
      copy_into(values, q.values);
      copy_into(scale, q.scale);
    };
  }
  std::byte* values = add(name, DType::kF8E4M3, {rows, cols});
  std::byte* scale_inv =
      add(stem + "weight_scale_inv", DType::kF32, {(rows + 127) / 128, (cols + 127) / 128});
  return [=] {
    const BlockFp8Weight q = quantize_block_fp8(dense().data(), rows, cols, name);
    copy_into(values, q.values);
    copy_into(scale_inv, q.scale_inv);
  };
}

}  // namespace

StoredWeights stored_weights(const ModelConfig& config, std::shared_ptr<const TensorSource> source,
                             CheckpointFormat format, ThreadPool& pool) {
  const auto specs = checkpoint_tensors(config);
  StoredWeights s;
  for (const TensorSpec& spec : specs) s.order.push_back(spec.name);
  if (format == CheckpointFormat::kBf16) {
    s.tensors = std::move(source);
    return s;
  }
  auto out = std::make_shared<OwnedTensors>(source->identity());
  s.order.clear();
  std::vector<std::function<void()>> jobs;
  for (const TensorSpec& spec : specs) {
    const TensorView view = *source->find(spec.name);
    const WeightFormat f = weight_format(config, spec, format);
    if (f != WeightFormat::kAsLaidOut) {
      jobs.push_back(add_quantized(*out, s.order, config, spec, f, view));
      continue;
    }
    s.order.push_back(spec.name);
    std::memcpy(out->add(spec.name, view.dtype, view.shape), view.data, view.nbytes);
  }
  pool.parallel_for(int64_t(jobs.size()), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) jobs[size_t(i)]();
  });
  s.tensors = std::move(out);
  return s;
}

}  // namespace sparkglm
