#include "receipts/receipt_commands.h"

#include <sstream>

#include "receipts/bundle_verifier.h"

#include "tests/receipts/bundle_fixture.h"

namespace sparkglm::receipts {
namespace {

class ReceiptCommands : public BundleTest {
 protected:
  using Command = int (*)(const std::vector<std::string>&, std::ostream&, std::ostream&);
  using Verifying = int (*)(const std::vector<std::string>&, std::ostream&, std::ostream&,
                            VerdictCheck);
  int run(Command command, const std::vector<std::string>& args) {
    out_.str("");
    err_.str("");
    return command(args, out_, err_);
  }
  // The receipts layer alone: no gate definitions, so verdicts are checked for consistency only
  // (gates/verdict_rederivation_test covers the re-derivation the program hands in).
  int run(Verifying command, const std::vector<std::string>& args) {
    out_.str("");
    err_.str("");
    return command(args, out_, err_, nullptr);
  }
  std::ostringstream out_, err_;
};

TEST_F(ReceiptCommands, KeygenSignVerifyWithPubkey) {
  const fs::path bundle = make_bundle("signed-by-command");
  const std::string key = (root_ / "lead.pem").string(), pub = (root_ / "lead.pub").string();
  ASSERT_EQ(run(keygen_command, {"--out", key}), 0) << err_.str();
  EXPECT_TRUE(fs::exists(pub));
  EXPECT_NE(out_.str().find("public key: "), std::string::npos);
  EXPECT_EQ(run(keygen_command, {"--out", key}), 2);  // never overwrites
  const std::string keys = keys_dir().string();
  // Not yet trusted: sign refuses, naming the key.
  EXPECT_EQ(run(sign_command, {bundle.string(), "--key", key, "--by", "lead", "--keys", keys}), 1);
  EXPECT_NE(err_.str().find("is not a trusted key"), std::string::npos) << err_.str();
  // The public half committed to the trusted folder (never the private key).
  fs::create_directories(keys_dir());
  fs::copy_file(pub, keys_dir() / "lead.pub");
  ASSERT_EQ(run(sign_command, {bundle.string(), "--key", key, "--by", "lead", "--state", "accepted",
                               "--keys", keys}),
            0)
      << err_.str();
  EXPECT_EQ(run(verify_command, {bundle.string(), "--pubkey", pub, "--keys", keys}), 0)
      << err_.str();
  EXPECT_NE(out_.str().find("OK "), std::string::npos);
  // The same bundle against a folder that does not trust the key.
  EXPECT_EQ(run(verify_command, {bundle.string(), "--keys", (root_ / "empty").string()}), 1);
  EXPECT_NE(err_.str().find("is not a trusted key"), std::string::npos) << err_.str();

  ASSERT_EQ(run(keygen_command, {"--out", (root_ / "other.pem").string()}), 0);
  EXPECT_EQ(run(verify_command,
                {bundle.string(), "--pubkey", (root_ / "other.pub").string(), "--keys", keys}),
            1);
  EXPECT_NE(err_.str().find("signed by another key"), std::string::npos) << err_.str();
}

TEST_F(ReceiptCommands, VerifyReportsEveryProblemAndExitsOne) {
  const fs::path bundle = make_bundle("broken");
  write(bundle / "extra.txt", "x");
  fs::remove(bundle / "requests.jsonl");
  EXPECT_EQ(run(verify_command, {bundle.string()}), 1);
  EXPECT_NE(err_.str().find("2 problems"), std::string::npos) << err_.str();
  EXPECT_NE(err_.str().find("extra.txt: not listed"), std::string::npos) << err_.str();
  EXPECT_NE(err_.str().find("requests.jsonl: missing"), std::string::npos) << err_.str();
}

TEST_F(ReceiptCommands, BadArgumentsExitTwo) {
  EXPECT_EQ(run(verify_command, {}), 2);
  EXPECT_EQ(run(verify_command, {"a", "b"}), 2);
  EXPECT_EQ(run(verify_command, {"a", "--unknown", "x"}), 2);
  EXPECT_NE(err_.str().find("unknown flag --unknown"), std::string::npos) << err_.str();
  EXPECT_EQ(run(verify_command, {"a", "--pubkey", "not-base64!"}), 2);
  EXPECT_EQ(run(sign_command, {"a"}), 2);
  EXPECT_EQ(run(keygen_command, {}), 2);
  EXPECT_EQ(run(index_command, {"--receipts", (root_ / "nowhere").string()}), 2);
}

TEST_F(ReceiptCommands, IndexThenVerifyAll) {
  const fs::path receipts = root_ / "receipts";
  make_bundle("only", receipts / "results");
  EXPECT_EQ(run(verify_all_command, {"--receipts", receipts.string()}), 1);
  EXPECT_NE(err_.str().find("index.json: missing"), std::string::npos) << err_.str();
  EXPECT_EQ(run(index_command, {"--receipts", receipts.string()}), 0) << err_.str();
  EXPECT_NE(out_.str().find("1 bundle(s)"), std::string::npos);
  EXPECT_EQ(run(verify_all_command, {"--receipts", receipts.string()}), 0) << err_.str();
}

}  // namespace
}  // namespace sparkglm::receipts
