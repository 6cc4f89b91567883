#pragma once
// Files of a bundle: read whole, hashed by streaming (server logs and request files can be large),
// and replaced atomically, so that a crash leaves the old qualification.json or the new one, never
// half of one.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace sparkglm::receipts {

struct FileDigest {
  std::string sha256;  // 64 lowercase hex digits
  uint64_t bytes = 0;
};

// The most read_file holds in memory unless told less: far above any bundle file read whole (the
// largest, a long run's requests.jsonl, is some megabytes), far below what a claimed size could
// ask.
inline constexpr uint64_t kMaxReadBytes = uint64_t(1) << 30;

// Throws Error(kIo) naming the file when it cannot be read. read_file also refuses, before reading
// a byte, a path that is not a regular file (a FIFO would block, /dev/zero never ends) and a file
// larger than max_bytes.
FileDigest digest_file(const std::filesystem::path& path);
std::string read_file(const std::filesystem::path& path, uint64_t max_bytes = kMaxReadBytes);

// Writes `bytes` to a temporary file beside `path`, flushes it to disk, then renames it over
// `path`. Throws Error(kIo) naming the file; the temporary file is removed on failure.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

}  // namespace sparkglm::receipts
