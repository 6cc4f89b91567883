#include "receipts/results_index.h"

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "tests/receipts/bundle_fixture.h"

namespace sparkglm::receipts {
namespace {

class ResultsIndex : public BundleTest {
 protected:
  void SetUp() override {
    BundleTest::SetUp();
    receipts_ = root_ / "receipts";
    results_ = receipts_ / "results";
    make_bundle("b-second", results_);
    make_bundle("a-first", results_);
    write_index(receipts_);
    ASSERT_TRUE(verify_all(receipts_).empty()) << text(verify_all(receipts_));
  }

  fs::path receipts_, results_;
};

TEST_F(ResultsIndex, ListsEachBundleByIdWithItsManifestHash) {
  const json index = json::parse(read_file(receipts_ / "index.json"));
  EXPECT_EQ(index["schema"], "sparkglm.receipts-index/1");
  ASSERT_EQ(index["bundles"].size(), 2u);
  EXPECT_EQ(index["bundles"][0]["id"], "a-first");
  EXPECT_EQ(index["bundles"][1]["id"], "b-second");
  const json& a = index["bundles"][0];
  EXPECT_EQ(a["path"], "results/a-first");
  EXPECT_EQ(a["qualification_sha256"], sha256_hex(read_file(results_ / "a-first" / kManifestName)));
  EXPECT_EQ(a["level"], "G2");
  EXPECT_EQ(a["state"], "measurement");
  EXPECT_EQ(a["created_at"], "2026-11-29T21:04:05Z");
  EXPECT_EQ(read_file(receipts_ / "index.json"), index_file_text(build_index(receipts_)));
}

TEST_F(ResultsIndex, AddedBundleMakesTheIndexStale) {
  make_bundle("c-third", results_);
  const Problems problems = verify_all(receipts_);
  EXPECT_PROBLEM(problems, "index.json", "bundle c-third (results/c-third) is not listed");
  EXPECT_EQ(problems.size(), 1u) << text(problems);
  write_index(receipts_);
  EXPECT_TRUE(verify_all(receipts_).empty()) << text(verify_all(receipts_));
}

TEST_F(ResultsIndex, EditedRecordMakesTheIndexStaleEvenWhenTheBundleVerifies) {
  json record = record_of(results_ / "a-first");
  record["title"] = "a title edited after indexing";
  save(results_ / "a-first", record);
  EXPECT_TRUE(verify_bundle(results_ / "a-first").empty());
  const Problems problems = verify_all(receipts_);
  EXPECT_PROBLEM(problems, "index.json", "the entry of bundle a-first differs");
  EXPECT_EQ(problems.size(), 1u) << text(problems);
}

TEST_F(ResultsIndex, RemovedBundleMakesTheIndexStale) {
  fs::remove_all(results_ / "b-second");
  EXPECT_PROBLEM(verify_all(receipts_), "index.json",
                 "lists bundle b-second, which is not under results/");
}

TEST_F(ResultsIndex, ReformattedOrMissingIndexIsStale) {
  const json index = json::parse(read_file(receipts_ / "index.json"));
  write(receipts_ / "index.json", index.dump());
  EXPECT_PROBLEM(verify_all(receipts_), "index.json", "not exactly what `index` writes");
  write(receipts_ / "index.json", "{");
  EXPECT_PROBLEM(verify_all(receipts_), "index.json", "not valid JSON");
  fs::remove(receipts_ / "index.json");
  EXPECT_PROBLEM(verify_all(receipts_), "index.json", "missing");
}

// An index claiming 8 GiB (sparse: no disk) is a problem named by its size, not a read of it.
TEST_F(ResultsIndex, HugeIndexIsAProblemNotARead) {
  fs::resize_file(receipts_ / "index.json", uintmax_t(8) << 30);
  EXPECT_PROBLEM(verify_all(receipts_), "index.json",
                 "8589934592 bytes, larger than the limit of 268435456 bytes");
}

TEST_F(ResultsIndex, VerifyAllNamesTheBundleAndFileThatFail) {
  write(results_ / "a-first" / "requests.jsonl", "tampered\n");
  write(results_ / "README.md", "not a bundle\n");
  fs::create_directory_symlink(results_ / "b-second", results_ / "b-link");
  const Problems problems = verify_all(receipts_);
  EXPECT_PROBLEM(problems, "results/a-first/requests.jsonl", "changed");
  EXPECT_PROBLEM(problems, "results/README.md", "not a bundle folder");
  EXPECT_PROBLEM(problems, "results/b-link", "a symbolic link");
}

TEST_F(ResultsIndex, EmptyReceiptsFolderHasAnEmptyIndex) {
  const fs::path empty = root_ / "empty-receipts";
  fs::create_directories(empty);
  EXPECT_PROBLEM(verify_all(empty), "index.json", "missing");
  EXPECT_EQ(write_index(empty)["bundles"].size(), 0u);
  EXPECT_TRUE(verify_all(empty).empty()) << text(verify_all(empty));
  EXPECT_THROW(write_index(root_ / "nowhere"), Error);
}

}  // namespace
}  // namespace sparkglm::receipts
