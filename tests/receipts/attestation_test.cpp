#include "receipts/attestation.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>

#include <cstdio>

#include "engine/core/error.h"
#include "receipts/bundle_verifier.h"
#include "tests/receipts/bundle_fixture.h"

namespace sparkglm::receipts {
namespace {

class Attestation : public BundleTest {
 protected:
  void SetUp() override {
    BundleTest::SetUp();
    bundle_ = make_bundle("2026-11-29-g2-signed");
    public_key_ = trust("maintainer");
    other_key_ = generate_key(root_ / "other.pem");  // anyone's key: not in the trusted folder
  }
  void sign_ok() {
    const Problems problems = sign_bundle(bundle_, root_ / "maintainer.pem", "lead", trusting());
    ASSERT_TRUE(problems.empty()) << text(problems);
  }
  Problems verify(const std::string& public_key = "") {
    return verify_bundle(bundle_, trusting(public_key));
  }

  fs::path bundle_;
  std::string public_key_, other_key_;
};

TEST_F(Attestation, SignThenVerifyRoundTrips) {
  sign_ok();
  const json record = record_of(bundle_);
  EXPECT_EQ(record["attestation"]["status"], "maintainer-reviewed");
  EXPECT_EQ(record["attestation"]["by"], "lead");
  EXPECT_EQ(record["attestation"]["signature"]["algorithm"], "ed25519");
  EXPECT_EQ(record["attestation"]["signature"]["public_key"], public_key_);
  EXPECT_TRUE(verify().empty()) << text(verify());
  const Problems by_key = verify(public_key_);
  EXPECT_TRUE(by_key.empty()) << text(by_key);
  // Everything else stays as nlohmann writes it.
  EXPECT_EQ(read_file(bundle_ / kManifestName), record_file_text(record));
  EXPECT_EQ(record["title"], valid_record("x")["title"]);
}

TEST_F(Attestation, SignatureByAnotherKeyIsCaught) {
  sign_ok();
  EXPECT_PROBLEM(verify(other_key_), "attestation.signature.public_key", "signed by another key");
  // Claiming the other key for this key's signature does not verify either.
  json record = record_of(bundle_);
  record["attestation"]["signature"]["public_key"] = other_key_;
  save(bundle_, record);
  EXPECT_PROBLEM(verify(), "attestation.signature.value", "does not verify");
  EXPECT_PROBLEM(verify(other_key_), "attestation.signature.value", "does not verify");
}

TEST_F(Attestation, EditAfterSigningIsCaught) {
  sign_ok();
  const json signed_record = record_of(bundle_);
  json record = signed_record;
  record["title"] = "a better title";
  save(bundle_, record);
  EXPECT_PROBLEM(verify(), "attestation.signature.value", "changed after signing");
  // An artifact changed and re-hashed into the record: the file checks pass, the signature not.
  const std::string path = signed_record["artifacts"][3]["path"];
  ASSERT_EQ(path, "server/candidate/server.log");
  write(bundle_ / path, "{}\n");
  record = signed_record;
  record["artifacts"][3]["sha256"] = digest_file(bundle_ / path).sha256;
  record["artifacts"][3]["bytes"] = 3;
  save(bundle_, record);
  const Problems problems = verify(public_key_);
  EXPECT_PROBLEM(problems, "attestation.signature.value", "does not verify");
  EXPECT_EQ(problems.size(), 1u) << text(problems);
  // Changing who attested is an edit too.
  record = signed_record;
  record["attestation"]["by"] = "someone else";
  save(bundle_, record);
  EXPECT_PROBLEM(verify(), "attestation.signature.value", "does not verify");
}

TEST_F(Attestation, PubkeyWithoutSignatureIsCaught) {
  EXPECT_TRUE(verify().empty()) << text(verify());
  EXPECT_PROBLEM(verify(public_key_), "attestation.signature", "--pubkey was given");
}

TEST_F(Attestation, SignRefusesABundleThatWouldNotVerifyAndWritesNothing) {
  const std::string before = read_file(bundle_ / kManifestName);
  write(bundle_ / "stray.txt", "x");
  EXPECT_PROBLEM(sign_bundle(bundle_, root_ / "maintainer.pem", "lead", trusting()), "stray.txt",
                 "not listed");
  EXPECT_EQ(read_file(bundle_ / kManifestName), before);
  fs::remove(bundle_ / "stray.txt");
  json record = record_of(bundle_);
  record["gates"][0]["status"] = "fail";
  record["gates"][0]["criteria"][0]["pass"] = false;
  save(bundle_, record);
  const std::string failed = read_file(bundle_ / kManifestName);
  EXPECT_PROBLEM(sign_bundle(bundle_, root_ / "maintainer.pem", "lead", trusting()),
                 "gates[0].status", "lower gate G0");
  EXPECT_EQ(read_file(bundle_ / kManifestName), failed);
  EXPECT_THROW(sign_bundle(bundle_, root_ / "maintainer.pem", "", trusting()), Error);
  EXPECT_THROW(sign_bundle(bundle_, root_ / "missing.pem", "lead", trusting()), Error);
}

TEST_F(Attestation, CanonicalBytesAreTheCompactDumpWithoutTheSignature) {
  sign_ok();
  const json record = record_of(bundle_);
  json stripped = record;
  stripped["attestation"].erase("signature");
  EXPECT_EQ(canonical_bytes(record), stripped.dump());
  EXPECT_EQ(canonical_bytes(record), canonical_bytes(stripped));
  EXPECT_EQ(canonical_bytes(record).find('\n'), std::string::npos);
  EXPECT_TRUE(signature_verifies(public_key_, canonical_bytes(record),
                                 record["attestation"]["signature"]["value"]));
  EXPECT_FALSE(signature_verifies(other_key_, canonical_bytes(record),
                                  record["attestation"]["signature"]["value"]));
  EXPECT_FALSE(signature_verifies(public_key_, canonical_bytes(record) + " ",
                                  record["attestation"]["signature"]["value"]));
}

TEST_F(Attestation, PublicKeyArgumentAcceptsPemFilePubFileOrText) {
  EXPECT_EQ(read_public_key(public_key_), public_key_);
  write(root_ / "maintainer.pub", public_key_ + "\n");
  EXPECT_EQ(read_public_key((root_ / "maintainer.pub").string()), public_key_);
  // A PEM public key exported from the private key by OpenSSL itself.
  FILE* in = std::fopen((root_ / "maintainer.pem").c_str(), "r");
  ASSERT_NE(in, nullptr);
  EVP_PKEY* key = PEM_read_PrivateKey(in, nullptr, nullptr, nullptr);
  std::fclose(in);
  ASSERT_NE(key, nullptr);
  FILE* out = std::fopen((root_ / "maintainer-pub.pem").c_str(), "w");
  ASSERT_EQ(PEM_write_PUBKEY(out, key), 1);
  std::fclose(out);
  EVP_PKEY_free(key);
  EXPECT_EQ(read_public_key((root_ / "maintainer-pub.pem").string()), public_key_);
  EXPECT_THROW(read_public_key("not-a-key"), Error);
  EXPECT_THROW(read_public_key((root_ / "maintainer.pem").string()), Error);  // the private key
}

TEST_F(Attestation, KeygenWritesAPrivateKeyAndNeverOverwrites) {
  struct stat st {};
  ASSERT_EQ(::stat((root_ / "maintainer.pem").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(read_file(root_ / "maintainer.pem").find("BEGIN PRIVATE KEY"), std::string::npos);
  EXPECT_THROW(generate_key(root_ / "maintainer.pem"), Error);
  EXPECT_NE(public_key_, other_key_);
}

TEST(Base64, RoundTripsAndRefusesNonCanonicalText) {
  for (const std::string& bytes : {std::string("a"), std::string("ab"), std::string("abc"),
                                   std::string("\0\xff\x10", 3), std::string(32, '\x7f')}) {
    std::string back;
    ASSERT_TRUE(base64_decode(base64_encode(bytes), &back));
    EXPECT_EQ(back, bytes);
  }
  EXPECT_EQ(base64_encode("abc"), "YWJj");
  std::string out;
  EXPECT_FALSE(base64_decode("", &out));
  EXPECT_FALSE(base64_decode("YWJ", &out));   // not a multiple of 4
  EXPECT_FALSE(base64_decode("YW J", &out));  // whitespace
  EXPECT_FALSE(base64_decode("YR==", &out));  // non-zero padding bits
  EXPECT_FALSE(base64_decode("Y*Jj", &out));
}

}  // namespace
}  // namespace sparkglm::receipts
