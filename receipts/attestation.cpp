#include "receipts/attestation.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "engine/core/utc_time.h"
#include "receipts/bundle_file.h"
#include "receipts/bundle_verifier.h"
#include "receipts/qualification_record.h"

namespace sparkglm::receipts {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using PKey = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

constexpr size_t kPublicKeyBytes = 32;
constexpr size_t kSignatureBytes = 64;

PKey read_private_key(const fs::path& pem) {
  const std::string text = read_file(pem);
  Bio bio(BIO_new_mem_buf(text.data(), int(text.size())), &BIO_free);
  PKey key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr,
           &EVP_PKEY_free);
  if (!key || EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519)
    throw Error(ErrorKind::kInvalidArgument,
                pem.string() + ": expected an unencrypted PEM Ed25519 private key (from `keygen`)");
  return key;
}

std::string raw_public_key(EVP_PKEY* key) {
  std::string raw(kPublicKeyBytes, '\0');
  size_t size = raw.size();
  SPARKGLM_ASSERT(
      EVP_PKEY_get_raw_public_key(key, reinterpret_cast<unsigned char*>(raw.data()), &size) == 1 &&
          size == kPublicKeyBytes,
      "OpenSSL could not export an Ed25519 public key");
  return raw;
}

}  // namespace

std::string canonical_bytes(const json& record) {
  json copy = record;
  if (copy.is_object() && copy.contains("attestation") && copy["attestation"].is_object())
    copy["attestation"].erase("signature");
  return copy.dump();
}

std::string generate_key(const fs::path& private_pem) {
  PKey key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"), &EVP_PKEY_free);
  SPARKGLM_ASSERT(key != nullptr, "OpenSSL could not generate an Ed25519 key");
  Bio bio(BIO_new(BIO_s_mem()), &BIO_free);
  SPARKGLM_ASSERT(bio && PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0,
                                                  nullptr, nullptr) == 1,
                  "OpenSSL could not write a PEM private key");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  // O_EXCL: a key is never overwritten, and it is private from its first byte.
  const int fd = ::open(private_pem.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw Error(ErrorKind::kIo, private_pem.string() + ": cannot create (" + std::strerror(errno) +
                                    "); keygen never overwrites a key");
  const bool ok = ::write(fd, data, size_t(size)) == ssize_t(size) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) throw Error(ErrorKind::kIo, private_pem.string() + ": write failed");
  return base64_encode(raw_public_key(key.get()));
}

std::string read_public_key(const std::string& argument) {
  std::string text = argument;
  std::error_code ec;
  if (fs::is_regular_file(argument, ec)) text = read_file(argument);
  if (text.find("-----BEGIN PUBLIC KEY-----") != std::string::npos) {
    Bio bio(BIO_new_mem_buf(text.data(), int(text.size())), &BIO_free);
    PKey key(bio ? PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr) : nullptr,
             &EVP_PKEY_free);
    if (!key || EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519)
      throw Error(ErrorKind::kInvalidArgument,
                  "--pubkey " + argument + ": expected an Ed25519 PEM public key");
    return base64_encode(raw_public_key(key.get()));
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.erase(0, 1);
  std::string raw;
  if (!base64_decode(text, &raw) || raw.size() != kPublicKeyBytes)
    throw Error(ErrorKind::kInvalidArgument,
                "--pubkey " + argument +
                    ": expected a PEM public key file, or base64 of a raw 32-byte Ed25519 key "
                    "(a file such as KEY.pub, or the text)");
  return text;
}

json sign_record(const json& record, const fs::path& private_pem) {
  PKey key = read_private_key(private_pem);
  const std::string message = canonical_bytes(record);
  MdCtx ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  std::string signature(kSignatureBytes, '\0');
  size_t size = signature.size();
  // Ed25519 hashes internally, so the digest is NULL and the message goes in one call.
  SPARKGLM_ASSERT(ctx && EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) == 1 &&
                      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()),
                                     &size, reinterpret_cast<const unsigned char*>(message.data()),
                                     message.size()) == 1 &&
                      size == kSignatureBytes,
                  "OpenSSL Ed25519 signing failed");
  return {{"algorithm", "ed25519"},
          {"public_key", base64_encode(raw_public_key(key.get()))},
          {"value", base64_encode(signature)}};
}

bool signature_verifies(const std::string& public_key, std::string_view message,
                        const std::string& signature) {
  std::string raw_key, raw_signature;
  if (!base64_decode(public_key, &raw_key) || raw_key.size() != kPublicKeyBytes ||
      !base64_decode(signature, &raw_signature) || raw_signature.size() != kSignatureBytes)
    return false;
  PKey key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                       reinterpret_cast<const unsigned char*>(raw_key.data()),
                                       raw_key.size()),
           &EVP_PKEY_free);
  MdCtx ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  return key && ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) == 1 &&
         EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(raw_signature.data()),
                          raw_signature.size(),
                          reinterpret_cast<const unsigned char*>(message.data()),
                          message.size()) == 1;
}

Problems sign_bundle(const fs::path& bundle, const fs::path& private_pem, const std::string& by,
                     const VerifyOptions& options, const std::string& state) {
  if (by.empty()) throw Error(ErrorKind::kInvalidArgument, "--by: expected the reviewer's name");
  const fs::path manifest = bundle / kManifestName;
  json record =
      parse_record_text(read_file(manifest, json_limits::kReceipt.max_bytes), manifest.string());
  if (!record.is_object() || !record.contains("attestation") || !record["attestation"].is_object())
    return {{manifest.string() + ": attestation", "missing (required) or not an object"}};
  if (!state.empty()) record["state"] = state;
  json& attestation = record["attestation"];
  attestation.erase("signature");
  attestation["status"] = "maintainer-reviewed";
  attestation["by"] = by;
  attestation["date"] = utc_now_iso8601();
  attestation["signature"] = sign_record(record, private_pem);
  Problems problems = verify_bundle_record(bundle, record, options);
  if (problems.empty()) write_file_atomically(manifest, record_file_text(record));
  return problems;
}

std::string base64_encode(std::string_view bytes) {
  std::string text(4 * ((bytes.size() + 2) / 3), '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(text.data()),
                      reinterpret_cast<const unsigned char*>(bytes.data()), int(bytes.size()));
  text.resize(size_t(n));
  return text;
}

bool base64_decode(const std::string& text, std::string* bytes) {
  if (text.empty() || text.size() % 4 != 0) return false;
  std::string raw(text.size() / 4 * 3, '\0');
  const int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(raw.data()),
                      reinterpret_cast<const unsigned char*>(text.data()), int(text.size()));
  if (n < 0) return false;
  // EVP_DecodeBlock keeps the bytes that padding stands for; drop them, then insist that
  // encoding gives the text back, which refuses whitespace and non-canonical padding bits.
  const size_t padding = text.ends_with("==") ? 2 : text.ends_with("=") ? 1 : 0;
  raw.resize(size_t(n) - padding);
  if (base64_encode(raw) != text) return false;
  *bytes = std::move(raw);
  return true;
}

}  // namespace sparkglm::receipts
