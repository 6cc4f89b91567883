#include "engine/model/tensor_source.h"

#include "engine/core/error.h"

namespace sparkglm {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::byte* OwnedTensors::add(const std::string& name, DType dtype, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  const size_t nbytes = size_t(n) * size_t(dtype_size(dtype));
  auto bytes = std::make_unique<std::byte[]>(nbytes);  // value-initialised: zeros
  std::byte* data = bytes.get();
  auto [it, inserted] =
      tensors_.try_emplace(name, Entry{dtype, std::move(shape), std::move(bytes), nbytes});
  SPARKGLM_ASSERT(inserted, "tensor added twice: " + name);
  (void)it;
  return data;
}

std::optional<TensorView> OwnedTensors::find(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return std::nullopt;
  const Entry& e = it->second;
  return TensorView{e.dtype, e.shape, e.bytes.get(), e.nbytes};
}

std::vector<std::string> OwnedTensors::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, _] : tensors_) out.push_back(name);
  return out;
}

}  // namespace sparkglm
