#pragma once
// A file read whole, refused before a byte is read when it is not a regular file (a FIFO would
// block the open, /dev/zero never ends) or is larger than the caller's limit, and never more than
// the size it had when checked (a file that grows meanwhile cannot enlarge the read). The callers
// (strict_json's read_json_text, receipts' read_file) word the refusal for their kind of file.
#include <cstdint>
#include <filesystem>
#include <string>

namespace sparkglm {

struct BoundedFile {
  enum class Problem { kNone, kStat, kNotRegular, kTooLarge, kOpen, kRead };
  Problem problem = Problem::kNone;
  std::string detail;  // the system's message for kStat
  uintmax_t size = 0;  // for kTooLarge: the file's size
  std::string bytes;   // kNone: the contents
};

BoundedFile read_bounded_file(const std::filesystem::path& path, uintmax_t max_bytes);

}  // namespace sparkglm
