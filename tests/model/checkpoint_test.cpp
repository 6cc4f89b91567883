#include "engine/model/checkpoint.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "engine/core/error.h"
#include "engine/model/safetensors.h"

namespace sparkglm {
namespace {

namespace fs = std::filesystem;

testing::AssertionResult Mentions(const std::string& message, const std::string& part) {
  if (message.find(part) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << "message \"" << message << "\" does not mention \"" << part << "\"";
}

// SHA-256 of a file read from disk, independently of the checkpoint's mapping.
std::string file_sha256(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EXPECT_EQ(EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr), 1);
  std::string hex;
  char two[3];
  for (unsigned int i = 0; i < len; ++i) {
    std::snprintf(two, sizeof(two), "%02x", digest[i]);
    hex += two;
  }
  return hex;
}

class CheckpointTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) /
           ("sparkglm_checkpoint_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A shard holding F32 [2] tensors named `names`; the first element of each is `tag`.
  void shard(const std::string& file, const std::vector<std::string>& names, float tag = 1.0f) {
    values_.push_back({tag, 2.0f});
    std::vector<std::pair<std::string, TensorView>> tensors;
    for (const auto& n : names) {
      tensors.emplace_back(
          n, TensorView{
                 DType::kF32, {2}, reinterpret_cast<const std::byte*>(values_.back().data()), 8});
    }
    fs::create_directories((dir_ / file).parent_path());
    write_safetensors((dir_ / file).string(), tensors);
  }
  void text(const std::string& file, const std::string& content) {
    std::ofstream(dir_ / file) << content;
  }
  std::string open_error() {
    try {
      Checkpoint::open(dir_.string());
    } catch (const Error& e) {
      return std::string(to_string(e.kind())) + "|" + e.what();
    }
    ADD_FAILURE() << "the checkpoint was accepted";
    return "";
  }

  fs::path dir_;
  std::vector<std::vector<float>> values_;
};

float first_f32(const TensorView& t) {
  float v;
  std::memcpy(&v, t.data, 4);
  return v;
}

TEST_F(CheckpointTest, OpensASingleModelFile) {
  shard("model.safetensors", {"b", "a"}, 3.0f);
  const auto ck = Checkpoint::open(dir_.string());
  EXPECT_EQ(ck->names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ck->shard_files(), (std::vector<std::string>{"model.safetensors"}));
  EXPECT_EQ(first_f32(*ck->find("a")), 3.0f);
  EXPECT_FALSE(ck->find("c").has_value());
}

TEST_F(CheckpointTest, OpensShardsNamedByTheIndex) {
  shard("model-00001-of-00002.safetensors", {"x.weight", "y.weight"}, 5.0f);
  shard("sub/model-00002-of-00002.safetensors", {"z.weight"}, 7.0f);
  text("model.safetensors.index.json", R"({"metadata": {"total_size": 24}, "weight_map": {
         "x.weight": "model-00001-of-00002.safetensors",
         "y.weight": "./model-00001-of-00002.safetensors",
         "z.weight": "sub/model-00002-of-00002.safetensors"}})");
  const auto ck = Checkpoint::open(dir_.string());
  EXPECT_EQ(ck->names(), (std::vector<std::string>{"x.weight", "y.weight", "z.weight"}));
  EXPECT_EQ(ck->shard_files(), (std::vector<std::string>{"model-00001-of-00002.safetensors",
                                                         "sub/model-00002-of-00002.safetensors"}));
  EXPECT_EQ(first_f32(*ck->find("y.weight")), 5.0f);
  EXPECT_EQ(first_f32(*ck->find("z.weight")), 7.0f);
}

TEST_F(CheckpointTest, IdentityHashesEveryShardAndIsStable) {
  shard("a.safetensors", {"t1"});
  shard("b.safetensors", {"t2"});
  text("model.safetensors.index.json",
       R"({"weight_map": {"t1": "a.safetensors", "t2": "b.safetensors"}})");
  const auto ck = Checkpoint::open(dir_.string());
  const std::string want = "sha256:a.safetensors=" + file_sha256(dir_ / "a.safetensors") +
                           ",b.safetensors=" + file_sha256(dir_ / "b.safetensors");
  std::vector<std::string> seen(4);
  std::vector<std::thread> threads;
  for (auto& s : seen) threads.emplace_back([&s, &ck] { s = ck->identity(); });
  for (auto& t : threads) t.join();
  for (const auto& s : seen) EXPECT_EQ(s, want);
  EXPECT_EQ(ck->identity(), want);
}

TEST_F(CheckpointTest, IdentityChangesWithAShardsBytes) {
  shard("model.safetensors", {"t"}, 1.0f);
  const std::string before = Checkpoint::open(dir_.string())->identity();
  shard("model.safetensors", {"t"}, 1.5f);
  EXPECT_NE(Checkpoint::open(dir_.string())->identity(), before);
}

TEST_F(CheckpointTest, MissingDirectoryIsAnIoError) {
  dir_ /= "absent";
  EXPECT_TRUE(Mentions(open_error(), "i/o error|"));
}

TEST_F(CheckpointTest, DirectoryWithoutWeightsIsRejected) {
  EXPECT_TRUE(
      Mentions(open_error(), "has neither model.safetensors.index.json nor model.safetensors"));
}

TEST_F(CheckpointTest, IndexThatIsNotJsonIsRejected) {
  text("model.safetensors.index.json", "{\"weight_map\": ");
  EXPECT_TRUE(Mentions(open_error(), "invalid checkpoint|"));
  EXPECT_TRUE(Mentions(open_error(), "model.safetensors.index.json: not valid JSON"));
}

// An index claiming 8 GiB (sparse: no disk) is refused by its size, a FIFO by its type; neither is
// read (one would ask for 8 GiB, the other would block).
TEST_F(CheckpointTest, HugeOrNonRegularIndexIsRefusedBeforeItIsRead) {
  text("model.safetensors.index.json", "{}");
  fs::resize_file(dir_ / "model.safetensors.index.json", uintmax_t(8) << 30);
  EXPECT_TRUE(Mentions(open_error(), "invalid checkpoint|"));
  EXPECT_TRUE(Mentions(open_error(),
                       "model.safetensors.index.json: 8589934592 bytes, larger than "
                       "the limit of 67108864 bytes"));
  fs::remove(dir_ / "model.safetensors.index.json");
  ASSERT_EQ(::mkfifo((dir_ / "model.safetensors.index.json").c_str(), 0600), 0);
  EXPECT_TRUE(Mentions(open_error(), "model.safetensors.index.json: not a regular file"));
}

TEST_F(CheckpointTest, DeeplyNestedIndexIsRejectedByName) {
  text("model.safetensors.index.json",
       "{\"weight_map\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  EXPECT_TRUE(Mentions(open_error(), "JSON nested deeper than 16 levels"));
}

TEST_F(CheckpointTest, IndexWithoutWeightMapIsRejected) {
  text("model.safetensors.index.json", R"({"metadata": {}})");
  EXPECT_TRUE(Mentions(open_error(), "has no \"weight_map\""));
  text("model.safetensors.index.json", R"({"weight_map": ["a.safetensors"]})");
  EXPECT_TRUE(Mentions(open_error(), "has no \"weight_map\""));
  text("model.safetensors.index.json", R"({"weight_map": {"t": 3}})");
  EXPECT_TRUE(Mentions(open_error(), "weight_map['t'] is a JSON number"));
}

TEST_F(CheckpointTest, ShardPathEscapingTheDirectoryIsRejected) {
  text("model.safetensors.index.json", R"({"weight_map": {"t": "../escape.safetensors"}})");
  EXPECT_TRUE(
      Mentions(open_error(), "weight_map['t'] is '../escape.safetensors', which contains '..'"));
  text("model.safetensors.index.json", R"({"weight_map": {"t": "sub/../../escape.safetensors"}})");
  EXPECT_TRUE(Mentions(open_error(), "contains '..'"));
  text("model.safetensors.index.json",
       R"({"weight_map": {"t": ")" + (dir_ / "model.safetensors").string() + "\"}}");
  EXPECT_TRUE(Mentions(open_error(), "an absolute path"));
}

TEST_F(CheckpointTest, ShardMissingFromTheDirectoryIsRejected) {
  text("model.safetensors.index.json", R"({"weight_map": {"t": "gone.safetensors"}})");
  EXPECT_TRUE(Mentions(open_error(), "names shard gone.safetensors, which is not in"));
}

TEST_F(CheckpointTest, TensorMissingFromItsShardIsRejected) {
  shard("a.safetensors", {"t1"});
  shard("b.safetensors", {"t3"});
  text("model.safetensors.index.json",
       R"({"weight_map": {"t1": "a.safetensors", "t2": "a.safetensors", "t3": "b.safetensors"}})");
  EXPECT_TRUE(
      Mentions(open_error(), "lists tensor 't2' in shard a.safetensors, which does not hold it"));
  text("model.safetensors.index.json",
       R"({"weight_map": {"t1": "b.safetensors", "t3": "a.safetensors"}})");
  EXPECT_TRUE(Mentions(open_error(), "(it is in a.safetensors)"));
}

TEST_F(CheckpointTest, TensorAbsentFromTheIndexIsRejected) {
  shard("a.safetensors", {"t1", "extra"});
  text("model.safetensors.index.json", R"({"weight_map": {"t1": "a.safetensors"}})");
  EXPECT_TRUE(Mentions(open_error(),
                       "shard a.safetensors holds tensor 'extra', which "
                       "model.safetensors.index.json does not list"));
}

TEST_F(CheckpointTest, TensorInTwoShardsIsRejected) {
  shard("a.safetensors", {"t1", "dup"});
  shard("b.safetensors", {"dup"});
  text("model.safetensors.index.json",
       R"({"weight_map": {"t1": "a.safetensors", "dup": "b.safetensors"}})");
  EXPECT_TRUE(
      Mentions(open_error(), "tensor 'dup' is in two shards: a.safetensors and b.safetensors"));
}

TEST_F(CheckpointTest, MalformedShardIsRejectedWithItsPath) {
  shard("model.safetensors", {"t"});
  fs::resize_file(dir_ / "model.safetensors", fs::file_size(dir_ / "model.safetensors") - 1);
  const std::string msg = open_error();
  EXPECT_TRUE(Mentions(msg, "model.safetensors"));
  EXPECT_TRUE(Mentions(msg, "truncated"));
}

}  // namespace
}  // namespace sparkglm
