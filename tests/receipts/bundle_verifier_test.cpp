#include "receipts/bundle_verifier.h"

#include <functional>

#include "tests/receipts/bundle_fixture.h"

namespace sparkglm::receipts {
namespace {

class BundleVerifier : public BundleTest {
 protected:
  void SetUp() override {
    BundleTest::SetUp();
    bundle_ = make_bundle("2026-11-29-g2-tinyglm-micro-cpu");
    ASSERT_TRUE(verify_bundle(bundle_).empty()) << text(verify_bundle(bundle_));
    pristine_ = record_of(bundle_);
  }
  // The problems after `edit` changes the record as the writer wrote it.
  Problems after_edit(const std::function<void(json&)>& edit) {
    json record = pristine_;
    edit(record);
    save(bundle_, record);
    return verify_bundle(bundle_);
  }
  std::string artifact_path(size_t i) { return record_of(bundle_)["artifacts"][i]["path"]; }

  fs::path bundle_;
  json pristine_;
};

TEST_F(BundleVerifier, FlippingOneByteOfAnyArtifactIsCaughtAndNamesIt) {
  const json artifacts = record_of(bundle_)["artifacts"];
  ASSERT_EQ(artifacts.size(), 5u);
  for (const json& a : artifacts) {
    const std::string path = a["path"];
    const fs::path file = bundle_ / path;
    const std::string original = read_file(file);
    for (size_t at : {size_t(0), original.size() / 2, original.size() - 1}) {
      std::string flipped = original;
      flipped[at] = char(flipped[at] ^ 0x01);
      write(file, flipped);
      const Problems problems = verify_bundle(bundle_);
      EXPECT_PROBLEM(problems, path, "changed: its sha256 is");
      EXPECT_EQ(problems.size(), 1u) << text(problems);
    }
    write(file, original);
    EXPECT_TRUE(verify_bundle(bundle_).empty()) << path << text(verify_bundle(bundle_));
  }
}

TEST_F(BundleVerifier, AppendedByteIsCaughtAsChangedSizeAndHash) {
  const std::string path = artifact_path(0);
  write(bundle_ / path, read_file(bundle_ / path) + "x");
  const Problems problems = verify_bundle(bundle_);
  EXPECT_PROBLEM(problems, path, "changed: it holds");
  EXPECT_PROBLEM(problems, path, "changed: its sha256 is");
}

TEST_F(BundleVerifier, EditedHashOrSizeInTheRecordIsCaught) {
  const std::string path = artifact_path(1);
  Problems problems = after_edit([](json& r) {
    std::string& sha = r["artifacts"][1]["sha256"].get_ref<std::string&>();
    sha[10] = sha[10] == '0' ? '1' : '0';
  });
  EXPECT_PROBLEM(problems, path, "artifacts[1].sha256 says");
  problems = after_edit(
      [](json& r) { r["artifacts"][1]["bytes"] = r["artifacts"][1]["bytes"].get<int64_t>() + 1; });
  EXPECT_PROBLEM(problems, path, "artifacts[1].bytes says");
  EXPECT_EQ(problems.size(), 1u) << text(problems);
}

TEST_F(BundleVerifier, UnlistedFilesAreCaughtAtAnyDepth) {
  write(bundle_ / "notes.txt", "best sample only\n");
  write(bundle_ / "server/candidate/extra.log", "x");
  write(bundle_ / "new/folder/deep.json", "{}");
  const Problems problems = verify_bundle(bundle_);
  EXPECT_PROBLEM(problems, "notes.txt", "not listed in artifacts");
  EXPECT_PROBLEM(problems, "server/candidate/extra.log", "not listed in artifacts");
  EXPECT_PROBLEM(problems, "new/folder/deep.json", "not listed in artifacts");
  EXPECT_EQ(problems.size(), 3u) << text(problems);
}

TEST_F(BundleVerifier, RemovedListedFileIsCaught) {
  const std::string path = artifact_path(2);
  fs::remove(bundle_ / path);
  EXPECT_PROBLEM(verify_bundle(bundle_), path, "missing, but listed in artifacts[2]");
}

TEST_F(BundleVerifier, DuplicateListingIsCaught) {
  const Problems problems =
      after_edit([](json& r) { r["artifacts"].push_back(r["artifacts"][0]); });
  EXPECT_PROBLEM(problems, "qualification.json: artifacts[5].path",
                 "listed twice (also artifacts[0])");
}

TEST_F(BundleVerifier, PathsOutsideTheBundleOrOddlySpelledAreCaughtAndNeverOpened) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/etc/passwd", "absolute"},          {"../outside.txt", "'..'"},
      {"server/../requests.jsonl", "'..'"}, {"./requests.jsonl", "'.'"},
      {"server//log", "empty component"},   {"server/", "empty component"},
      {"server\\log", "backslash"},         {"qualification.json", "never listed"},
  };
  for (const auto& [path, why] : cases) {
    // Copied into the lambda: clang 14 cannot capture a structured binding.
    const Problems problems = after_edit([&, p = path](json& r) { r["artifacts"][0]["path"] = p; });
    EXPECT_PROBLEM(problems, "qualification.json: artifacts[0].path", why);
    // The file it replaced in the listing is now unlisted.
    EXPECT_PROBLEM(problems, "requests.jsonl", "not listed");
  }
}

TEST_F(BundleVerifier, MalformedHashesAreCaught) {
  for (const std::string& bad :
       {std::string(64, 'A'), std::string(63, 'a'), std::string(65, 'a'), std::string(64, 'g'),
        std::string("sha256:") + std::string(57, 'a')}) {
    const Problems problems = after_edit([&](json& r) { r["artifacts"][3]["sha256"] = bad; });
    EXPECT_PROBLEM(problems, "qualification.json: artifacts[3].sha256", "64 lowercase hex digits");
  }
}

TEST_F(BundleVerifier, SymbolicLinksAreProblemsAndNotFollowed) {
  const std::string path = artifact_path(0);
  // A listed file replaced by a link to an identical copy elsewhere: same bytes, still refused.
  const fs::path copy = root_ / "copy";
  fs::copy_file(bundle_ / path, copy);
  fs::remove(bundle_ / path);
  fs::create_symlink(copy, bundle_ / path);
  Problems problems = verify_bundle(bundle_);
  EXPECT_PROBLEM(problems, path, "a symbolic link");
  // A linked folder is reported, not walked into.
  fs::create_directory_symlink(root_, bundle_ / "linked");
  problems = verify_bundle(bundle_);
  EXPECT_PROBLEM(problems, "linked", "a symbolic link");
  EXPECT_FALSE(has(problems, "linked/", "")) << text(problems);
}

// A listed file whose folder is a link to an identical copy outside: the file is reached through
// the link, so it is refused by that folder's name and never hashed or read.
TEST_F(BundleVerifier, ArtifactsInsideALinkedFolderAreRefusedNotRead) {
  std::string path;
  for (const json& a : pristine_["artifacts"])
    if (a["path"].get<std::string>().find('/') != std::string::npos) path = a["path"];
  ASSERT_FALSE(path.empty());
  const std::string folder = path.substr(0, path.find('/'));
  fs::copy(bundle_ / folder, root_ / "outside", fs::copy_options::recursive);
  fs::remove_all(bundle_ / folder);
  fs::create_directory_symlink(root_ / "outside", bundle_ / folder);
  const Problems problems = verify_bundle(bundle_);
  EXPECT_PROBLEM(problems, path, "inside " + folder + ", a symbolic link (not followed)");
  EXPECT_PROBLEM(problems, folder, "a symbolic link");
}

TEST_F(BundleVerifier, IdMustMatchTheFolderAndThePattern) {
  EXPECT_PROBLEM(after_edit([](json& r) { r["id"] = "another-bundle"; }), "qualification.json: id",
                 "does not match the folder name \"2026-11-29-g2-tinyglm-micro-cpu\"");
  // A folder named like a bad id: the pattern is checked on its own.
  const fs::path bad = root_ / "Bad_ID";
  fs::rename(bundle_, bad);
  bundle_ = bad;
  save(bundle_, pristine_);  // the id is still the old one: mismatch
  EXPECT_PROBLEM(verify_bundle(bad), "qualification.json: id", "does not match the folder name");
  pristine_["id"] = "Bad_ID";
  save(bundle_, pristine_);
  const Problems problems = verify_bundle(bad);
  EXPECT_PROBLEM(problems, "qualification.json: id", "^[a-z0-9][a-z0-9._-]*$");
  EXPECT_FALSE(has(problems, "id", "folder name")) << text(problems);
}

TEST_F(BundleVerifier, EachMissingRequiredFieldIsNamed) {
  for (const char* field :
       {"schema", "id", "title", "created_at", "state", "level", "target", "change", "environment",
        "workloads", "gates", "metrics", "artifacts", "limitations", "attestation"}) {
    const Problems problems = after_edit([&](json& r) { r.erase(field); });
    EXPECT_PROBLEM(problems, std::string("qualification.json: ") + field, "missing (required)");
  }
}

TEST_F(BundleVerifier, ValuesOutsideTheirEnumAreNamed) {
  EXPECT_PROBLEM(after_edit([](json& r) { r["state"] = "great"; }), "qualification.json: state",
                 "experiment | candidate");
  EXPECT_PROBLEM(after_edit([](json& r) { r["level"] = "G6"; }), "qualification.json: level",
                 "G0 | G1");
  EXPECT_PROBLEM(after_edit([](json& r) { r["gates"][2]["status"] = "passed"; }), "gates[2].status",
                 "pass | fail | not-run | not-applicable");
  EXPECT_PROBLEM(after_edit([](json& r) { r["metrics"][0]["verdict"] = "win"; }),
                 "metrics[0].verdict", "better | worse");
  EXPECT_PROBLEM(after_edit([](json& r) { r["change"]["class"] = "kernel"; }), "change.class",
                 "operator");
  EXPECT_PROBLEM(after_edit([](json& r) { r["attestation"]["status"] = "reviewed"; }),
                 "attestation.status", "unattested | maintainer-reviewed");
}

TEST_F(BundleVerifier, AcceptedOrPromotedMustBeAttested) {
  for (const char* state : {"accepted", "promoted"}) {
    const Problems problems = after_edit([&](json& r) { r["state"] = state; });
    EXPECT_PROBLEM(problems, "attestation.status", "needs status \"maintainer-reviewed\"");
  }
  // Attested in words only: the claim still needs a trusted signature (tests/receipts/trust_test).
  const Problems worded = after_edit([](json& r) {
    r["state"] = "promoted";
    r["attestation"] = {
        {"status", "maintainer-reviewed"}, {"by", "lead"}, {"date", "2026-11-30T09:00:00Z"}};
  });
  EXPECT_PROBLEM(worded, "attestation.signature", "missing");
  EXPECT_EQ(worded.size(), 1u) << text(worded);
}

TEST_F(BundleVerifier, AttestedRecordNeedsItsLowerGatesPassed) {
  trust("lead");
  // Attested and signed by a trusted key, so that only the gate rules are left to judge.
  const auto attest = [&](json& r) {
    r["attestation"] = {
        {"status", "maintainer-reviewed"}, {"by", "lead"}, {"date", "2026-11-30T09:00:00Z"}};
    r["attestation"]["signature"] = sign_record(r, root_ / "lead.pem");
  };
  const auto fail = [](json& r, size_t gate) {
    r["gates"][gate]["status"] = "fail";
    for (json& c : r["gates"][gate]["criteria"]) c["pass"] = false;
  };
  const auto signed_problems = [&](const std::function<void(json&)>& edit) {
    json record = pristine_;
    edit(record);
    attest(record);
    save(bundle_, record);
    return verify_bundle(bundle_, trusting());
  };
  EXPECT_PROBLEM(signed_problems([&](json& r) { fail(r, 0); }), "gates[0].status",
                 "lower gate G0 is \"fail\"");
  EXPECT_PROBLEM(signed_problems([&](json& r) {
                   r["gates"][1]["status"] = "not-run";
                   r["gates"][1]["summary"] = "no GPU";
                 }),
                 "gates[1].status", "lower gate G1 is \"not-run\"");
  // The gate at the record's own level may fail: a reviewed rejection is a valid record.
  const Problems own_level = signed_problems([&](json& r) {
    fail(r, 2);
    r["state"] = "rejected";
  });
  EXPECT_TRUE(own_level.empty()) << text(own_level);
  // Unattested, a failed lower gate is only a result.
  const Problems unattested = after_edit([&](json& r) { fail(r, 0); });
  EXPECT_TRUE(unattested.empty()) << text(unattested);
}

TEST_F(BundleVerifier, MissingMalformedOrAmbiguousManifestIsNamed) {
  const std::string original = read_file(bundle_ / kManifestName);
  write(bundle_ / kManifestName, original.substr(0, original.size() / 2));
  EXPECT_PROBLEM(verify_bundle(bundle_), "qualification.json", "malformed: not valid JSON");
  write(bundle_ / kManifestName, "{\"id\": \"a\", \"id\": \"b\"}");
  EXPECT_PROBLEM(verify_bundle(bundle_), "qualification.json", "key \"id\" appears twice");
  fs::remove(bundle_ / kManifestName);
  EXPECT_PROBLEM(verify_bundle(bundle_), "qualification.json", "missing");
  EXPECT_PROBLEM(verify_bundle(root_ / "no-such-bundle"), "no-such-bundle", "not a folder");
}

// A manifest claiming 8 GiB (sparse: it takes no disk) is refused by its size before it is read.
TEST_F(BundleVerifier, HugeManifestIsRefusedBeforeItIsRead) {
  fs::resize_file(bundle_ / kManifestName, uintmax_t(8) << 30);
  EXPECT_PROBLEM(verify_bundle(bundle_), "qualification.json",
                 "8589934592 bytes, larger than the limit of 268435456 bytes");
}

TEST_F(BundleVerifier, LeftoverTemporaryFileIsUnlisted) {
  write(bundle_ / ".qualification.json.tmp.123", "{}");
  EXPECT_PROBLEM(verify_bundle(bundle_), ".qualification.json.tmp.123", "not listed");
}

TEST_F(BundleVerifier, BundleVerifiesFromAnyWorkingPathSpelling) {
  EXPECT_TRUE(verify_bundle(bundle_.string() + "/").empty());
  EXPECT_TRUE(verify_bundle(bundle_ / ".").empty());
}

}  // namespace
}  // namespace sparkglm::receipts
