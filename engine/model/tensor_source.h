#pragma once
// A named set of tensors: a memory-mapped checkpoint or tensors generated in memory. The weight
// binder reads every tensor through this interface, so both routes load the same way.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/dtype.h"

namespace sparkglm {

struct TensorView {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;
  size_t nbytes = 0;
  int64_t numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

std::string shape_string(const std::vector<int64_t>& shape);  // "[4096, 512]"

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual std::optional<TensorView> find(const std::string& name) const = 0;
  virtual std::vector<std::string> names() const = 0;  // sorted
  // What identifies these weights in a receipt: shard hashes or the dummy seed.
  virtual std::string identity() const = 0;
};

// Tensors held in memory (the dummy generator's output, or test fixtures).
class OwnedTensors : public TensorSource {
 public:
  explicit OwnedTensors(std::string identity) : identity_(std::move(identity)) {}
  // Allocates a zeroed tensor and returns its bytes for the caller to fill.
  std::byte* add(const std::string& name, DType dtype, std::vector<int64_t> shape);
  std::optional<TensorView> find(const std::string& name) const override;
  std::vector<std::string> names() const override;
  std::string identity() const override { return identity_; }

 private:
  struct Entry {
    DType dtype;
    std::vector<int64_t> shape;
    std::unique_ptr<std::byte[]> bytes;
    size_t nbytes;
  };
  std::map<std::string, Entry> tensors_;
  std::string identity_;
};

}  // namespace sparkglm
