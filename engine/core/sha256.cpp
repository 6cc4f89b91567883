#include "engine/core/sha256.h"

#include <openssl/evp.h>

#include <algorithm>
#include <memory>

#include "engine/core/error.h"

namespace sparkglm {

std::string sha256_hex(const void* data, size_t size) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  bool ok = ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1;
  // Large inputs (checkpoint shards, mapped) go in 64 MiB pieces.
  constexpr size_t kChunk = size_t(64) << 20;
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t at = 0; ok && at < size; at += kChunk)
    ok = EVP_DigestUpdate(ctx.get(), bytes + at, std::min(kChunk, size - at)) == 1;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ok = ok && EVP_DigestFinal_ex(ctx.get(), digest, &len) == 1;
  SPARKGLM_ASSERT(ok && len == 32, "OpenSSL SHA-256 failed");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(64);
  for (unsigned int i = 0; i < len; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

}  // namespace sparkglm
