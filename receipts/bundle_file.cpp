#include "receipts/bundle_file.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "engine/core/bounded_file.h"
#include "engine/core/error.h"

namespace sparkglm::receipts {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void io_error(const fs::path& path, const std::string& what) {
  throw Error(ErrorKind::kIo, path.string() + ": " + what);
}

std::string hex(const unsigned char* bytes, unsigned int size) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  for (unsigned int i = 0; i < size; ++i) {
    text += kHex[bytes[i] >> 4];
    text += kHex[bytes[i] & 15];
  }
  return text;
}

}  // namespace

FileDigest digest_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) io_error(path, "cannot open for reading");
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  SPARKGLM_ASSERT(ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1,
                  "OpenSSL SHA-256 init failed");
  FileDigest digest;
  std::vector<char> buffer(size_t(1) << 20);
  while (in) {
    in.read(buffer.data(), std::streamsize(buffer.size()));
    const auto got = in.gcount();
    if (got <= 0) break;
    SPARKGLM_ASSERT(EVP_DigestUpdate(ctx.get(), buffer.data(), size_t(got)) == 1,
                    "OpenSSL SHA-256 update failed");
    digest.bytes += uint64_t(got);
  }
  if (in.bad()) io_error(path, "read failed");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  SPARKGLM_ASSERT(EVP_DigestFinal_ex(ctx.get(), md, &len) == 1 && len == 32,
                  "OpenSSL SHA-256 final failed");
  digest.sha256 = hex(md, len);
  return digest;
}

std::string read_file(const fs::path& path, uint64_t max_bytes) {
  using Problem = BoundedFile::Problem;
  BoundedFile f = read_bounded_file(path, max_bytes);
  switch (f.problem) {
    case Problem::kNone:
      return std::move(f.bytes);
    case Problem::kStat:
      io_error(path, "cannot open for reading: " + f.detail);
    case Problem::kNotRegular:
      io_error(path, "not a regular file");
    case Problem::kTooLarge:
      io_error(path, std::to_string(f.size) + " bytes, larger than the limit of " +
                         std::to_string(max_bytes) + " bytes for a file read whole");
    case Problem::kOpen:
      io_error(path, "cannot open for reading");
    case Problem::kRead:
      break;
  }
  io_error(path, "read failed");
}

void write_file_atomically(const fs::path& path, std::string_view bytes) {
  // The temporary name starts with '.' and carries the pid, so concurrent writers never share one.
  std::string name = ".";
  name.append(path.filename().string()).append(".tmp.").append(std::to_string(::getpid()));
  const fs::path temp = path.parent_path() / name;
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_error(temp, std::string("cannot create: ") + std::strerror(errno));
  size_t done = 0;
  bool ok = true;
  while (ok && done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += size_t(n);
  }
  const int saved = errno;
  ok = ok && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(ok ? errno : saved);
    ::unlink(temp.c_str());
    io_error(path, "cannot write: " + why);
  }
}

}  // namespace sparkglm::receipts
