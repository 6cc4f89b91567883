#pragma once
// The safetensors file format: an 8-byte little-endian header length N, N bytes of JSON naming each
// tensor's dtype, shape and byte range, then the data region those ranges point into.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/model/tensor_source.h"

namespace sparkglm {

// Headers longer than this are refused before anything is allocated for them.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte range [begin, end) relative to the data region
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // ordered by begin offset (file order)
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // where the data region starts in the file: 8 + N
  uint64_t data_size = 0;    // bytes from data_offset to the end of the file
};

// Parses and validates the header of a whole file held in `data[0, size)`. Pure, so it can be
// fuzzed. Every malformed input is an Error(kInvalidCheckpoint) naming the tensor and what is
// wrong.
SafetensorsHeader parse_safetensors_header(const std::byte* data, size_t size);

// A safetensors file mapped read-only; its TensorViews point into the mapping and live as long as
// it.
class SafetensorsFile {
 public:
  // Error(kIo) when the file cannot be opened or mapped, Error(kInvalidCheckpoint) when malformed.
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  size_t size() const { return size_; }            // bytes of the whole file
  const std::byte* data() const { return base_; }  // the whole file, [0, size())
  const SafetensorsHeader& header() const { return header_; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  std::vector<std::string> names() const;  // sorted
  std::optional<TensorView> find(const std::string& name) const;

 private:
  void unmap();

  std::string path_;
  const std::byte* base_ = nullptr;
  size_t size_ = 0;
  SafetensorsHeader header_;
  std::map<std::string, size_t> by_name_;  // index into header_.entries
};

// Writes `tensors` in the given order, packed with no gaps, after a header padded with spaces so
// that the data region starts on an 8-byte boundary. Writes `path + ".tmp"` and renames it, so a
// reader never sees a half-written file. Error(kInvalidArgument) for a tensor whose nbytes does not
// match its shape or a repeated name; Error(kIo) when the file cannot be written.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, TensorView>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace sparkglm
