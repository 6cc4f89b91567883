// Forged attestations: a claim above `measurement` counts only when a key committed to the trusted
// folder signed it. The tests make throwaway keys and point the verifier at their own folder.
#include <gtest/gtest.h>

#include "receipts/attestation.h"
#include "receipts/bundle_verifier.h"
#include "receipts/results_index.h"
#include "receipts/trusted_keys.h"
#include "tests/receipts/bundle_fixture.h"

namespace sparkglm::receipts {
namespace {

class Trust : public BundleTest {
 protected:
  void SetUp() override {
    BundleTest::SetUp();
    bundle_ = make_bundle("2026-11-29-g2-claimed");
    maintainer_ = trust("maintainer");
    stranger_ = generate_key(root_ / "stranger.pem");
  }
  // The record with `edit` applied and, when `key` is given, signed by it (bypassing sign_bundle's
  // own check, as a forger would).
  void forge(const std::function<void(json&)>& edit, const std::string& key = "") {
    json record = record_of(bundle_);
    edit(record);
    record["attestation"] = {
        {"status", "maintainer-reviewed"}, {"by", "lead"}, {"date", "2026-11-30T09:00:00Z"}};
    if (!key.empty()) record["attestation"]["signature"] = sign_record(record, root_ / key);
    save(bundle_, record);
  }

  fs::path bundle_;
  std::string maintainer_, stranger_;
};

TEST_F(Trust, UnsignedAcceptedStateIsRefused) {
  forge([](json& r) { r["state"] = "accepted"; });
  EXPECT_PROBLEM(verify_bundle(bundle_, trusting()), "attestation.signature",
                 "missing: state \"accepted\"");
}

TEST_F(Trust, EveryStateAboveMeasurementNeedsASignature) {
  for (const char* state :
       {"experiment", "candidate", "accepted", "promoted", "rejected", "baseline"}) {
    json record = record_of(bundle_);
    record["state"] = state;
    save(bundle_, record);
    EXPECT_PROBLEM(verify_bundle(bundle_, trusting()), "attestation.signature", "claims more")
        << state;
  }
  // An attestation is a claim even on a measurement.
  forge([](json&) {});
  EXPECT_PROBLEM(verify_bundle(bundle_, trusting()), "attestation.signature", "missing");
}

TEST_F(Trust, SignatureByAKeyOutsideTheTrustedFolderIsRefused) {
  forge([](json& r) { r["state"] = "accepted"; }, "stranger.pem");
  const Problems problems = verify_bundle(bundle_, trusting());
  EXPECT_PROBLEM(problems, "attestation.signature.public_key", "is not a trusted key");
  EXPECT_EQ(problems.size(), 1u) << text(problems);  // the signature itself is sound
  // Naming the stranger with --pubkey does not make it trusted.
  EXPECT_PROBLEM(verify_bundle(bundle_, trusting(stranger_)), "attestation.signature.public_key",
                 "is not a trusted key");
}

TEST_F(Trust, SignRefusesAnUntrustedKeyAndWritesNothing) {
  const std::string before = read_file(bundle_ / kManifestName);
  EXPECT_PROBLEM(sign_bundle(bundle_, root_ / "stranger.pem", "stranger", trusting(), "accepted"),
                 "attestation.signature.public_key", "is not a trusted key");
  EXPECT_EQ(read_file(bundle_ / kManifestName), before);
}

TEST_F(Trust, ATrustedSignatureRaisesTheStateAndRemovingTheKeyRevokesIt) {
  const Problems signed_ =
      sign_bundle(bundle_, root_ / "maintainer.pem", "lead", trusting(), "accepted");
  ASSERT_TRUE(signed_.empty()) << text(signed_);
  EXPECT_EQ(record_of(bundle_)["state"], "accepted");
  EXPECT_TRUE(verify_bundle(bundle_, trusting()).empty())
      << text(verify_bundle(bundle_, trusting()));
  EXPECT_TRUE(verify_bundle(bundle_, trusting(maintainer_)).empty());
  // The state is covered by the signature: lowering or raising it by hand breaks it.
  json record = record_of(bundle_);
  record["state"] = "promoted";
  save(bundle_, record);
  EXPECT_PROBLEM(verify_bundle(bundle_, trusting()), "attestation.signature.value",
                 "does not verify");
  record["state"] = "accepted";
  save(bundle_, record);
  fs::remove(keys_dir() / "maintainer.pub");
  EXPECT_PROBLEM(verify_bundle(bundle_, trusting()), "attestation.signature.public_key",
                 "is not a trusted key");
}

TEST_F(Trust, AMissingTrustedFolderTrustsNobody) {
  forge([](json& r) { r["state"] = "accepted"; }, "maintainer.pem");
  VerifyOptions options = trusting();
  options.trusted_keys = root_ / "no-such-folder";
  EXPECT_PROBLEM(verify_bundle(bundle_, options), "attestation.signature.public_key",
                 "is not a trusted key");
}

TEST_F(Trust, TrustedFolderNamesItsKeysAndRefusesPrivateOnes) {
  const TrustedKeys keys = load_trusted_keys(keys_dir());
  ASSERT_NE(keys.holder(maintainer_), nullptr);
  EXPECT_EQ(*keys.holder(maintainer_), "maintainer");
  EXPECT_EQ(keys.holder(stranger_), nullptr);
  EXPECT_TRUE(keys.problems.empty());
  // A private key committed by mistake, a duplicate and a malformed file are each named.
  fs::copy_file(root_ / "stranger.pem", keys_dir() / "oops.pem");
  write(keys_dir() / "second.pub", maintainer_ + "\n");
  write(keys_dir() / "junk.pub", "not a key\n");
  write(keys_dir() / "README.md", "ignored\n");
  const TrustedKeys bad = load_trusted_keys(keys_dir());
  EXPECT_PROBLEM(bad.problems, "oops.pem", "PRIVATE key");
  EXPECT_PROBLEM(bad.problems, "second.pub", "the same key as maintainer");
  EXPECT_PROBLEM(bad.problems, "junk.pub", "expected a PEM public key file");
  EXPECT_EQ(bad.problems.size(), 3u) << text(bad.problems);
  EXPECT_EQ(bad.holder(stranger_), nullptr);
  // verify-all stops on a private key in the trusted folder even when no bundle is signed.
  const fs::path receipts = root_ / "receipts";
  make_bundle("only", receipts / "results");
  write_index(receipts);
  VerifyOptions options = trusting();
  EXPECT_PROBLEM(verify_all(receipts, options), "oops.pem", "PRIVATE key");
}

}  // namespace
}  // namespace sparkglm::receipts
