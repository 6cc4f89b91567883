#include "engine/core/bounded_file.h"

#include <fstream>
#include <ios>
#include <system_error>

namespace sparkglm {

BoundedFile read_bounded_file(const std::filesystem::path& path, uintmax_t max_bytes) {
  using Problem = BoundedFile::Problem;
  BoundedFile f;
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (!ec && !std::filesystem::is_regular_file(status)) {
    f.problem = Problem::kNotRegular;
    return f;
  }
  if (!ec) f.size = std::filesystem::file_size(path, ec);
  if (ec) {
    f.problem = Problem::kStat;
    f.detail = ec.message();
    return f;
  }
  if (f.size > max_bytes) {
    f.problem = Problem::kTooLarge;
    return f;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    f.problem = Problem::kOpen;
    return f;
  }
  f.bytes.assign(size_t(f.size), '\0');
  in.read(f.bytes.data(), std::streamsize(f.size));
  if (in.bad()) {
    f.problem = Problem::kRead;
    f.bytes.clear();
    return f;
  }
  f.bytes.resize(size_t(in.gcount()));
  return f;
}

}  // namespace sparkglm
