#pragma once
// SHA-256 (OpenSSL EVP) of bytes in memory, for the run identity: a profile's bytes and the
// effective configuration's canonical JSON.
#include <string>
#include <string_view>

namespace sparkglm::options {

// 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);

}  // namespace sparkglm::options
