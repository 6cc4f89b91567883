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

// Throws Error(kIo) naming the file when it cannot be read.
FileDigest digest_file(const std::filesystem::path& path);
std::string read_file(const std::filesystem::path& path);

// Writes `bytes` to a temporary file beside `path`, flushes it to disk, then renames it over
// `path`. Throws Error(kIo) naming the file; the temporary file is removed on failure.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

}  // namespace sparkglm::receipts
