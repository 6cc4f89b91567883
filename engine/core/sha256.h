#pragma once
// SHA-256 (OpenSSL EVP) as 64 lowercase hex digits: checkpoint shard identities, profile and
// configuration identities, and (later) receipt artifacts.
#include <cstddef>
#include <string>
#include <string_view>

namespace sparkglm {

std::string sha256_hex(const void* data, size_t size);
inline std::string sha256_hex(std::string_view bytes) {
  return sha256_hex(bytes.data(), bytes.size());
}

}  // namespace sparkglm
