#include "engine/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"

namespace sparkglm {
namespace {

using nlohmann::json;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

[[noreturn]] void invalid(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::kInvalidCheckpoint, where + ": " + what);
}

[[noreturn]] void io_error(const std::string& what) {
  throw Error(ErrorKind::kIo, what + ": " + std::strerror(errno));
}

std::map<std::string, std::string> parse_metadata(const json& v, const std::string& where) {
  if (!v.is_object()) {
    invalid(where, std::string("__metadata__ is a JSON ") + v.type_name() +
                       "; expected an object of strings");
  }
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string()) {
      invalid(where,
              "__metadata__['" + key + "'] is a JSON " + value.type_name() + "; expected a string");
    }
    out[key] = value.get<std::string>();
  }
  return out;
}

// A dimension must be a JSON integer in [0, INT64_MAX].
int64_t parse_dim(const json& d, const std::string& where, const std::string& who, size_t axis) {
  const std::string at = who + ": shape[" + std::to_string(axis) + "] = " + d.dump();
  if (!d.is_number_integer()) invalid(where, at + " is not an integer");
  if (d.is_number_unsigned()) {
    const uint64_t u = d.get<uint64_t>();
    if (u > uint64_t(kInt64Max)) invalid(where, at + " does not fit in int64");
    return int64_t(u);
  }
  const int64_t v = d.get<int64_t>();
  if (v < 0) invalid(where, at + " is negative");
  return v;
}

uint64_t parse_offset(const json& d, const std::string& where, const std::string& who) {
  if (!d.is_number_unsigned()) {
    invalid(where, who + ": data_offsets entry " + d.dump() + " is not a non-negative integer");
  }
  return d.get<uint64_t>();
}

SafetensorsEntry parse_entry(const std::string& name, const json& v, uint64_t data_size,
                             const std::string& where) {
  if (name.empty()) invalid(where, "a tensor has an empty name");
  const std::string who = "tensor '" + name + "'";
  if (!v.is_object()) {
    invalid(where, who + " is a JSON " + v.type_name() +
                       "; expected an object with dtype, shape and data_offsets");
  }
  auto field = [&](const char* key) -> const json& {
    auto it = v.find(key);
    if (it == v.end()) invalid(where, who + " has no \"" + key + "\"");
    return *it;
  };
  SafetensorsEntry e;
  e.name = name;

  const json& dtype = field("dtype");
  if (!dtype.is_string()) invalid(where, who + ": dtype " + dtype.dump() + " is not a string");
  const auto parsed_dtype = dtype_from_name(dtype.get_ref<const std::string&>());
  if (!parsed_dtype) {
    invalid(where, who + ": unknown dtype " + dtype.dump() +
                       "; expected one of F32, F16, BF16, F8_E4M3, F8_E8M0, U8, I32, I64");
  }
  e.dtype = *parsed_dtype;

  const json& shape = field("shape");
  if (!shape.is_array()) invalid(where, who + ": shape " + shape.dump() + " is not an array");
  // The product of the non-zero dims must fit, so that no consumer overflows whatever order it
  // multiplies them in; a zero dim then makes the tensor empty.
  int64_t nonzero_product = 1;
  bool has_zero = false;
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    const int64_t d = parse_dim(shape[axis], where, who, axis);
    e.shape.push_back(d);
    if (d == 0) {
      has_zero = true;
    } else if (nonzero_product > kInt64Max / d) {
      invalid(where, who + ": shape " + shape.dump() + " has more than 2^63 elements");
    }
    if (d != 0) nonzero_product *= d;
  }
  const int64_t numel = has_zero ? 0 : nonzero_product;
  const int64_t elem = dtype_size(e.dtype);
  if (numel > kInt64Max / elem) {
    invalid(where, who + ": shape " + shape.dump() + " needs more than 2^63 bytes");
  }
  const uint64_t nbytes = uint64_t(numel * elem);

  const json& offsets = field("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2) {
    invalid(where, who + ": data_offsets " + offsets.dump() + " is not a [begin, end] pair");
  }
  e.begin = parse_offset(offsets[0], where, who);
  e.end = parse_offset(offsets[1], where, who);
  const std::string range =
      "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
  if (e.begin > e.end) invalid(where, who + ": " + range + " ends before it begins");
  if (e.end > data_size) {
    invalid(where, who + ": " + range + " runs past the data region of " +
                       std::to_string(data_size) + " bytes (is the file truncated?)");
  }
  if (e.end - e.begin != nbytes) {
    invalid(where, who + ": " + range + " holds " + std::to_string(e.end - e.begin) +
                       " bytes; expected " + std::to_string(nbytes) + " for " +
                       std::string(dtype_name(e.dtype)) + " " + shape_string(e.shape));
  }
  return e;
}

// Gaps between tensors are accepted (some writers align each tensor; the reference Rust reader
// refuses them, so write_safetensors never leaves any). Overlapping byte ranges are not.
void check_no_overlap(std::vector<SafetensorsEntry>& entries, const std::string& where) {
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const SafetensorsEntry* furthest = nullptr;  // the non-empty tensor reaching furthest so far
  for (const auto& e : entries) {
    if (e.begin == e.end) continue;  // an empty tensor occupies no bytes
    if (furthest && e.begin < furthest->end) {
      invalid(where, "tensor '" + e.name + "' [" + std::to_string(e.begin) + ", " +
                         std::to_string(e.end) + ") overlaps tensor '" + furthest->name + "' [" +
                         std::to_string(furthest->begin) + ", " + std::to_string(furthest->end) +
                         ")");
    }
    if (!furthest || e.end > furthest->end) furthest = &e;
  }
}

SafetensorsHeader parse_header(const std::byte* data, size_t size, const std::string& where) {
  if (size < 8) {
    invalid(where, "file is " + std::to_string(size) +
                       " bytes, too short for the 8-byte header length (is it truncated?)");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint64_t(data[i]);
  if (n > kMaxSafetensorsHeaderBytes) {
    invalid(where, "header length " + std::to_string(n) + " exceeds the limit of " +
                       std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
  }
  if (n > size - 8) {
    invalid(where, "header length " + std::to_string(n) + " exceeds the " +
                       std::to_string(size - 8) +
                       " bytes that follow the length (is the file truncated?)");
  }
  SafetensorsHeader h;
  h.data_offset = 8 + n;
  h.data_size = size - h.data_offset;
  // A tensor named twice is malformed, where a plain parse would keep one of the two silently.
  const json j = parse_json_unique_keys(
      std::string_view(reinterpret_cast<const char*>(data + 8), size_t(n)), where + ": header",
      ErrorKind::kInvalidCheckpoint, json_limits::kSafetensorsHeader);
  if (!j.is_object()) {
    invalid(where, std::string("header is a JSON ") + j.type_name() + "; expected an object");
  }
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      h.metadata = parse_metadata(value, where);
    } else {
      h.entries.push_back(parse_entry(key, value, h.data_size, where));
    }
  }
  check_no_overlap(h.entries, where);
  return h;
}

// False, with errno set, when the bytes could not all be written.
bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w == 0) errno = EIO;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const std::byte* data, size_t size) {
  return parse_header(data, size, "safetensors");
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO named like a shard would otherwise wait for a writer forever
  // before the regular-file check below could refuse it. It changes nothing for a regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) io_error("cannot open " + path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    io_error("cannot stat " + path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorKind::kIo, path + " is not a regular file");
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {  // mmap refuses length 0; the parser then reports the empty file
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      errno = err;
      io_error("cannot map " + path);
    }
    base_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
  try {
    header_ = parse_header(base_, size_, path);
  } catch (...) {
    unmap();
    throw;
  }
  for (size_t i = 0; i < header_.entries.size(); ++i) by_name_[header_.entries[i].name] = i;
}

SafetensorsFile::~SafetensorsFile() {
  unmap();
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      header_(std::move(other.header_)),
      by_name_(std::move(other.by_name_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    header_ = std::move(other.header_);
    by_name_ = std::move(other.by_name_);
  }
  return *this;
}

void SafetensorsFile::unmap() {
  if (base_) ::munmap(const_cast<std::byte*>(base_), size_);
  base_ = nullptr;
  size_ = 0;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(by_name_.size());
  for (const auto& [name, _] : by_name_) out.push_back(name);
  return out;
}

std::optional<TensorView> SafetensorsFile::find(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  const SafetensorsEntry& e = header_.entries[it->second];
  return TensorView{e.dtype, e.shape, base_ + header_.data_offset + e.begin,
                    size_t(e.end - e.begin)};
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, TensorView>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the tensors in the caller's order, which is also their order in the data.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    const std::string who = "write_safetensors(" + path + "): tensor '" + name + "'";
    if (name.empty() || name == "__metadata__") {
      throw Error(ErrorKind::kInvalidArgument, who + " is not a valid tensor name");
    }
    if (!seen.insert(name).second)
      throw Error(ErrorKind::kInvalidArgument, who + " is given twice");
    for (auto d : t.shape) {
      if (d < 0) throw Error(ErrorKind::kInvalidArgument, who + " has a negative dimension");
    }
    const size_t expected = size_t(t.numel()) * size_t(dtype_size(t.dtype));
    if (t.nbytes != expected || (t.nbytes > 0 && t.data == nullptr)) {
      throw Error(ErrorKind::kInvalidArgument, who + " has " + std::to_string(t.nbytes) +
                                                   " bytes; expected " + std::to_string(expected) +
                                                   " for " + std::string(dtype_name(t.dtype)) +
                                                   " " + shape_string(t.shape));
    }
    header[name] = {{"dtype", std::string(dtype_name(t.dtype))},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // names or metadata that are not UTF-8
    throw Error(ErrorKind::kInvalidArgument, "write_safetensors(" + path + "): " + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // 8 + N is then a multiple of 8
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = (uint64_t(text.size()) >> (8 * i)) & 0xffu;

  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_error("cannot create " + tmp);
  auto fail = [&](const std::string& what, bool close_fd) {
    const int err = errno;
    if (close_fd) ::close(fd);
    ::unlink(tmp.c_str());
    errno = err;
    io_error(what);
  };
  bool written = write_all(fd, length, sizeof(length)) && write_all(fd, text.data(), text.size());
  for (const auto& [name, t] : tensors) written = written && write_all(fd, t.data, t.nbytes);
  if (!written) fail("cannot write " + tmp, true);
  // Flushed before the rename, so that after a crash the path holds the old file or the new one.
  if (::fsync(fd) != 0) fail("cannot flush " + tmp, true);
  if (::close(fd) != 0) fail("cannot close " + tmp, false);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename " + tmp + " to " + path, false);
}

}  // namespace sparkglm
