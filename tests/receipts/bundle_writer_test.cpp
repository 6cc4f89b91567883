#include "receipts/bundle_writer.h"

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "receipts/bundle_verifier.h"
#include "tests/receipts/bundle_fixture.h"

namespace sparkglm::receipts {
namespace {

using BundleWriterTest = BundleTest;

// The message of the Error `body` throws, or "" when it throws none.
template <typename Body>
std::string error_of(Body body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(BundleWriterTest, ListsEveryArtifactSortedWithItsHashAndSize) {
  const fs::path bundle = make_bundle("listed");
  const json record = record_of(bundle);
  const json& artifacts = record["artifacts"];
  ASSERT_EQ(artifacts.size(), 5u);
  for (size_t i = 0; i < artifacts.size(); ++i) {
    const std::string path = artifacts[i]["path"];
    const std::string bytes = read_file(bundle / path);
    EXPECT_EQ(artifacts[i]["sha256"], sha256_hex(bytes)) << path;
    EXPECT_EQ(artifacts[i]["bytes"], bytes.size()) << path;
    if (i > 0) {
      EXPECT_LT(artifacts[i - 1]["path"].get<std::string>(), path);
    }
  }
  EXPECT_EQ(artifacts[3]["path"], "server/candidate/server.log");
  EXPECT_EQ(artifacts[3]["kind"], "log");
  EXPECT_EQ(record["attestation"]["status"], "unattested");
  EXPECT_EQ(read_file(bundle / kManifestName), record_file_text(record));
  EXPECT_TRUE(verify_bundle(bundle).empty());
}

TEST_F(BundleWriterTest, RefusesAFolderThatIsNotEmptyButTakesAnEmptyOne) {
  write(root_ / "used" / "old.txt", "x");
  EXPECT_NE(error_of([&] { BundleWriter w(root_ / "used"); }).find("exists and is not empty"),
            std::string::npos);
  fs::create_directories(root_ / "empty");
  EXPECT_EQ(error_of([&] { BundleWriter w(root_ / "empty"); }), "");
}

TEST_F(BundleWriterTest, RefusesBadArtifactPathsKindsAndRepeats) {
  BundleWriter w(root_ / "paths");
  EXPECT_NE(error_of([&] { w.add_bytes("/abs", "x", "log"); }).find("absolute"), std::string::npos);
  EXPECT_NE(error_of([&] { w.add_bytes("a/../b", "x", "log"); }).find("'..'"), std::string::npos);
  EXPECT_NE(error_of([&] { w.add_bytes("qualification.json", "x", "log"); }).find("manifest"),
            std::string::npos);
  EXPECT_NE(error_of([&] { w.add_bytes("a.txt", "x", "notes"); }).find("kind \"notes\""),
            std::string::npos);
  w.add_bytes("a.txt", "x", "log");
  EXPECT_NE(error_of([&] { w.add_file("a.txt", "log"); }).find("added twice"), std::string::npos);
}

TEST_F(BundleWriterTest, FinishListsEveryRecordProblemAndWritesNothing) {
  BundleWriter w(root_ / "bad-record");
  w.add_bytes("requests.jsonl", "{}\n", "requests");
  json record = valid_record("bad-record");
  record.erase("title");
  record["level"] = "G9";
  const std::string message = error_of([&] { w.finish(record); });
  EXPECT_NE(message.find("title: missing (required)"), std::string::npos) << message;
  EXPECT_NE(message.find("level: expected one of G0"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(root_ / "bad-record" / kManifestName));
}

TEST_F(BundleWriterTest, FinishRefusesStrayFilesUnwrittenArtifactsAndAWrongId) {
  {
    BundleWriter w(root_ / "stray");
    w.add_bytes("requests.jsonl", "{}\n", "requests");
    write(w.where_is("debug.txt"), "x");
    EXPECT_NE(error_of([&] { w.finish(valid_record("stray")); }).find("debug.txt: not listed"),
              std::string::npos);
  }
  {
    BundleWriter w(root_ / "unwritten");
    w.add_file("server/candidate/server.log", "log");
    EXPECT_NE(error_of([&] { w.finish(valid_record("unwritten")); }).find("not written"),
              std::string::npos);
  }
  BundleWriter w(root_ / "named");
  EXPECT_NE(error_of([&] { w.finish(valid_record("other-name")); }).find("folder name"),
            std::string::npos);
}

}  // namespace
}  // namespace sparkglm::receipts
