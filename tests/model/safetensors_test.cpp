#include "engine/model/safetensors.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"

namespace sparkglm {
namespace {

namespace fs = std::filesystem;

// The bytes of a file: an 8-byte length (the header's own length unless given), the header text,
// then `data_bytes` bytes of data region.
std::vector<std::byte> file_of(const std::string& header, size_t data_bytes,
                               std::optional<uint64_t> length = std::nullopt) {
  const uint64_t n = length.value_or(header.size());
  std::vector<std::byte> out;
  for (int i = 0; i < 8; ++i) out.push_back(std::byte((n >> (8 * i)) & 0xff));
  for (char c : header) out.push_back(std::byte(c));
  for (size_t i = 0; i < data_bytes; ++i) out.push_back(std::byte(i & 0xff));
  return out;
}

testing::AssertionResult Mentions(const std::string& message, const std::string& part) {
  if (message.find(part) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << "message \"" << message << "\" does not mention \"" << part << "\"";
}

std::string parse_error(const std::vector<std::byte>& file) {
  try {
    parse_safetensors_header(file.data(), file.size());
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidCheckpoint) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "the header was accepted";
  return "";
}

std::vector<std::byte> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

class SafetensorsFileTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) /
           ("sparkglm_safetensors_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Three tensors of different dtypes and sizes; odd sizes make packing visible.
  std::vector<std::pair<std::string, TensorView>> sample() {
    for (size_t i = 0; i < f32_.size(); ++i) f32_[i] = float(i) * 0.5f - 1.0f;
    for (size_t i = 0; i < u8_.size(); ++i) u8_[i] = uint8_t(i * 37 + 5);
    for (size_t i = 0; i < bf16_.size(); ++i) bf16_[i] = uint16_t(0x3f80 + i);
    return {
        {"b.weight", TensorView{DType::kU8, {3, 5}, as_bytes(u8_), u8_.size()}},
        {"a.weight", TensorView{DType::kF32, {2, 3}, as_bytes(f32_), f32_.size() * 4}},
        {"c.bias", TensorView{DType::kBF16, {7}, as_bytes(bf16_), bf16_.size() * 2}},
        {"empty", TensorView{DType::kI64, {0, 4}, nullptr, 0}},
        {"scalar", TensorView{DType::kF32, {}, as_bytes(f32_), 4}},
    };
  }
  template <typename T>
  static const std::byte* as_bytes(const std::vector<T>& v) {
    return reinterpret_cast<const std::byte*>(v.data());
  }

  fs::path dir_;
  std::vector<float> f32_ = std::vector<float>(6);
  std::vector<uint8_t> u8_ = std::vector<uint8_t>(15);
  std::vector<uint16_t> bf16_ = std::vector<uint16_t>(7);
};

TEST(SafetensorsHeader, ParsesEntriesInFileOrderWithMetadata) {
  const auto file = file_of(
      R"({"__metadata__": {"format": "pt"},
          "z": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]},
          "a": {"dtype": "F8_E4M3", "shape": [3], "data_offsets": [8, 11]}})",
      11);
  const SafetensorsHeader h = parse_safetensors_header(file.data(), file.size());
  ASSERT_EQ(h.entries.size(), 2u);
  EXPECT_EQ(h.entries[0].name, "z");
  EXPECT_EQ(h.entries[0].dtype, DType::kBF16);
  EXPECT_EQ(h.entries[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(h.entries[1].name, "a");
  EXPECT_EQ(h.entries[1].begin, 8u);
  EXPECT_EQ(h.entries[1].end, 11u);
  EXPECT_EQ(h.metadata.at("format"), "pt");
  EXPECT_EQ(h.data_offset, file.size() - 11);
  EXPECT_EQ(h.data_size, 11u);
}

TEST(SafetensorsHeader, AcceptsGapsAndEmptyTensors) {
  // A gap [4, 8) and an empty tensor inside another's range occupy no shared bytes.
  const auto file = file_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                "b": {"dtype": "U8", "shape": [4], "data_offsets": [8, 12]},
                                "e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [9, 9]}})",
                            16);
  EXPECT_EQ(parse_safetensors_header(file.data(), file.size()).entries.size(), 3u);
}

TEST(SafetensorsHeader, RejectsFileShorterThanTheLengthPrefix) {
  const auto file = file_of("", 0);
  EXPECT_TRUE(Mentions(parse_error({file.begin(), file.begin() + 5}), "truncated"));
}

TEST(SafetensorsHeader, RejectsHeaderLengthBeyondTheFile) {
  const std::string msg = parse_error(file_of("{}", 0, 1000));
  EXPECT_TRUE(Mentions(msg, "header length 1000"));
  EXPECT_TRUE(Mentions(msg, "truncated"));
}

TEST(SafetensorsHeader, RejectsAbsurdHeaderLength) {
  EXPECT_TRUE(Mentions(parse_error(file_of("{}", 0, uint64_t(1) << 62)), "exceeds the limit"));
}

TEST(SafetensorsHeader, RejectsHeaderThatIsNotJson) {
  EXPECT_TRUE(Mentions(parse_error(file_of("{\"a\": ", 0)), "not valid JSON"));
  EXPECT_TRUE(Mentions(parse_error(file_of("", 0)), "not valid JSON"));
}

TEST(SafetensorsHeader, RejectsHeaderThatIsNotAnObject) {
  EXPECT_TRUE(Mentions(parse_error(file_of("[1, 2]", 0)), "expected an object"));
}

TEST(SafetensorsHeader, RejectsDeeplyNestedHeader) {
  EXPECT_TRUE(Mentions(parse_error(file_of(std::string(100000, '['), 0)),
                       "header: JSON nested deeper than 8 levels"));
}

TEST(SafetensorsHeader, RejectsUnknownDtype) {
  const std::string msg =
      parse_error(file_of(R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", 8));
  EXPECT_TRUE(Mentions(msg, "tensor 'w'"));
  EXPECT_TRUE(Mentions(msg, "unknown dtype \"F64\""));
}

TEST(SafetensorsHeader, RejectsNegativeAndNonIntegerDimensions) {
  EXPECT_TRUE(Mentions(
      parse_error(file_of(R"({"w": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]}})", 0)),
      "shape[0] = -1 is negative"));
  EXPECT_TRUE(Mentions(
      parse_error(file_of(R"({"w": {"dtype": "U8", "shape": [2.5], "data_offsets": [0, 2]}})", 2)),
      "shape[0] = 2.5 is not an integer"));
  EXPECT_TRUE(Mentions(
      parse_error(file_of(R"({"w": {"dtype": "U8", "shape": ["2"], "data_offsets": [0, 2]}})", 2)),
      "is not an integer"));
}

TEST(SafetensorsHeader, RejectsShapeWhoseProductOverflows) {
  EXPECT_TRUE(Mentions(parse_error(file_of(
                           R"({"w": {"dtype": "U8", "shape": [4294967296, 4294967296],
                                     "data_offsets": [0, 0]}})",
                           0)),
                       "more than 2^63 elements"));
  // A zero dim does not excuse the rest: a consumer may multiply the others first.
  EXPECT_TRUE(Mentions(parse_error(file_of(
                           R"({"w": {"dtype": "U8", "shape": [0, 4294967296, 4294967296],
                                     "data_offsets": [0, 0]}})",
                           0)),
                       "more than 2^63 elements"));
  EXPECT_TRUE(Mentions(parse_error(file_of(
                           R"({"w": {"dtype": "I64", "shape": [4611686018427387904],
                                     "data_offsets": [0, 0]}})",
                           0)),
                       "more than 2^63 bytes"));
}

TEST(SafetensorsHeader, RejectsByteSizeThatDisagreesWithShape) {
  const std::string msg = parse_error(
      file_of(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 24));
  EXPECT_TRUE(Mentions(msg, "tensor 'w'"));
  EXPECT_TRUE(Mentions(msg, "holds 20 bytes; expected 24 for F32 [2, 3]"));
}

TEST(SafetensorsHeader, RejectsOffsetsOutsideTheDataRegion) {
  const std::string msg =
      parse_error(file_of(R"({"w": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}})", 10));
  EXPECT_TRUE(Mentions(msg, "tensor 'w': data_offsets [4, 12] runs past the data region of 10"));
  EXPECT_TRUE(Mentions(
      parse_error(file_of(R"({"w": {"dtype": "U8", "shape": [0], "data_offsets": [5, 4]}})", 10)),
      "ends before it begins"));
  EXPECT_TRUE(Mentions(
      parse_error(file_of(R"({"w": {"dtype": "U8", "shape": [0], "data_offsets": [-1, 0]}})", 10)),
      "not a non-negative integer"));
  EXPECT_TRUE(Mentions(
      parse_error(file_of(R"({"w": {"dtype": "U8", "shape": [0], "data_offsets": [0]}})", 10)),
      "is not a [begin, end] pair"));
}

TEST(SafetensorsHeader, RejectsOverlappingRanges) {
  const std::string msg =
      parse_error(file_of(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                             "b": {"dtype": "U8", "shape": [4], "data_offsets": [6, 10]}})",
                          10));
  EXPECT_TRUE(Mentions(msg, "tensor 'b' [6, 10) overlaps tensor 'a' [0, 8)"));
}

TEST(SafetensorsHeader, RejectsATensorContainedInAnother) {
  EXPECT_TRUE(Mentions(
      parse_error(file_of(R"({"big": {"dtype": "U8", "shape": [16], "data_offsets": [0, 16]},
                             "mid": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]},
                             "end": {"dtype": "U8", "shape": [2], "data_offsets": [10, 12]}})",
                          16)),
      "overlaps tensor 'big'"));
}

TEST(SafetensorsHeader, RejectsDuplicateTensorName) {
  const std::string msg =
      parse_error(file_of(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                             "w": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                          2));
  EXPECT_TRUE(Mentions(msg, "header: key \"w\" appears twice"));
}

TEST(SafetensorsHeader, RejectsEntryWithoutARequiredField) {
  EXPECT_TRUE(Mentions(parse_error(file_of(R"({"w": {"dtype": "U8", "shape": [1]}})", 1)),
                       "tensor 'w' has no \"data_offsets\""));
  EXPECT_TRUE(Mentions(parse_error(file_of(R"({"w": [1, 2]})", 1)), "tensor 'w' is a JSON array"));
}

TEST(SafetensorsHeader, RejectsMetadataThatIsNotStrings) {
  EXPECT_TRUE(Mentions(parse_error(file_of(R"({"__metadata__": {"total": 5}})", 0)),
                       "__metadata__['total'] is a JSON number"));
}

TEST_F(SafetensorsFileTest, WriteThenReadRoundTripsBytesShapesAndMetadata) {
  const auto tensors = sample();
  write_safetensors(path("m.safetensors"), tensors, {{"format", "pt"}, {"note", "x"}});
  const SafetensorsFile f(path("m.safetensors"));
  EXPECT_EQ(f.path(), path("m.safetensors"));
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"note", "x"}}));
  EXPECT_EQ(f.names(),
            (std::vector<std::string>{"a.weight", "b.weight", "c.bias", "empty", "scalar"}));
  for (const auto& [name, want] : tensors) {
    const auto got = f.find(name);
    ASSERT_TRUE(got.has_value()) << name;
    EXPECT_EQ(got->dtype, want.dtype) << name;
    EXPECT_EQ(got->shape, want.shape) << name;
    ASSERT_EQ(got->nbytes, want.nbytes) << name;
    if (want.nbytes) {
      EXPECT_EQ(std::memcmp(got->data, want.data, want.nbytes), 0) << name;
    }
  }
  EXPECT_FALSE(f.find("missing").has_value());
}

TEST_F(SafetensorsFileTest, WrittenFileFollowsTheFormat) {
  const auto tensors = sample();
  write_safetensors(path("m.safetensors"), tensors);
  const auto bytes = read_bytes(path("m.safetensors"));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint64_t(bytes[size_t(i)]);
  EXPECT_EQ((8 + n) % 8, 0u) << "the data region should start 8-byte aligned";
  const auto header =
      nlohmann::json::parse(std::string(reinterpret_cast<const char*>(&bytes[8]), n));
  EXPECT_FALSE(header.contains("__metadata__"));
  // Tensors are packed in the order given, with no gaps.
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const auto& e = header.at(name);
    EXPECT_EQ(e.at("dtype").get<std::string>(), dtype_name(t.dtype)) << name;
    EXPECT_EQ(e.at("shape").get<std::vector<int64_t>>(), t.shape) << name;
    EXPECT_EQ(e.at("data_offsets"), nlohmann::json::array({offset, offset + t.nbytes})) << name;
    if (t.nbytes) {
      EXPECT_EQ(std::memcmp(&bytes[8 + n + offset], t.data, t.nbytes), 0) << name;
    }
    offset += t.nbytes;
  }
  EXPECT_EQ(bytes.size(), 8 + n + offset);
}

TEST_F(SafetensorsFileTest, RewritingAReadFileReproducesItsBytes) {
  write_safetensors(path("one.safetensors"), sample(), {{"k", "v"}});
  const SafetensorsFile f(path("one.safetensors"));
  std::vector<std::pair<std::string, TensorView>> again;
  for (const auto& e : f.header().entries) again.emplace_back(e.name, *f.find(e.name));
  write_safetensors(path("two.safetensors"), again, f.metadata());
  EXPECT_EQ(read_bytes(path("one.safetensors")), read_bytes(path("two.safetensors")));
}

TEST_F(SafetensorsFileTest, WriterLeavesNoTemporaryFileAndReplacesTheTarget) {
  write_safetensors(path("m.safetensors"), sample());
  write_safetensors(path("m.safetensors"), {});
  EXPECT_FALSE(fs::exists(path("m.safetensors.tmp")));
  EXPECT_TRUE(SafetensorsFile(path("m.safetensors")).names().empty());
}

TEST_F(SafetensorsFileTest, WriterRejectsInconsistentTensors) {
  const float x[2] = {1, 2};
  const auto* p = reinterpret_cast<const std::byte*>(x);
  try {
    write_safetensors(path("m.safetensors"), {{"w", TensorView{DType::kF32, {3}, p, 8}}});
    ADD_FAILURE() << "nbytes 8 for F32 [3] was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_TRUE(Mentions(e.what(), "tensor 'w' has 8 bytes; expected 12 for F32 [3]"));
  }
  EXPECT_THROW(
      write_safetensors(path("m.safetensors"), {{"w", TensorView{DType::kF32, {2}, p, 8}},
                                                {"w", TensorView{DType::kF32, {2}, p, 8}}}),
      Error);
  EXPECT_FALSE(fs::exists(path("m.safetensors")));
}

TEST_F(SafetensorsFileTest, WriterReportsAnUnwritablePathAsAnIoError) {
  try {
    write_safetensors(path("no/such/dir/m.safetensors"), sample());
    ADD_FAILURE() << "wrote into a directory that does not exist";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_TRUE(Mentions(e.what(), "cannot create " + path("no/such/dir/m.safetensors.tmp")));
  }
}

TEST_F(SafetensorsFileTest, RejectsTruncatedFile) {
  write_safetensors(path("m.safetensors"), sample());
  const auto full = fs::file_size(path("m.safetensors"));
  for (const uintmax_t keep : {full - 1, uintmax_t(20), uintmax_t(3), uintmax_t(0)}) {
    fs::copy_file(path("m.safetensors"), path("cut.safetensors"),
                  fs::copy_options::overwrite_existing);
    fs::resize_file(path("cut.safetensors"), keep);
    try {
      SafetensorsFile f(path("cut.safetensors"));
      ADD_FAILURE() << "a file cut to " << keep << " of " << full << " bytes was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidCheckpoint);
      EXPECT_TRUE(Mentions(e.what(), "truncated")) << "cut to " << keep;
      EXPECT_TRUE(Mentions(e.what(), path("cut.safetensors")));
    }
  }
}

TEST_F(SafetensorsFileTest, MissingFileIsAnIoError) {
  try {
    SafetensorsFile f(path("absent.safetensors"));
    ADD_FAILURE() << "opened a file that does not exist";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_TRUE(Mentions(e.what(), "absent.safetensors"));
  }
}

// A FIFO named like a shard: a blocking open would wait for a writer forever.
TEST_F(SafetensorsFileTest, FifoIsRefusedAsNotARegularFileWithoutWaiting) {
  ASSERT_EQ(::mkfifo(path("model.safetensors").c_str(), 0600), 0);
  try {
    SafetensorsFile f(path("model.safetensors"));
    ADD_FAILURE() << "opened a FIFO";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_TRUE(Mentions(e.what(), "model.safetensors is not a regular file")) << e.what();
  }
}

TEST_F(SafetensorsFileTest, MovedFileKeepsItsViewsValid) {
  write_safetensors(path("m.safetensors"), sample());
  SafetensorsFile a(path("m.safetensors"));
  const TensorView before = *a.find("a.weight");
  SafetensorsFile b(std::move(a));
  SafetensorsFile c(path("m.safetensors"));
  c = std::move(b);
  const TensorView after = *c.find("a.weight");
  EXPECT_EQ(after.data, before.data);
  float first;
  std::memcpy(&first, after.data, 4);
  EXPECT_EQ(first, -1.0f);
}

}  // namespace
}  // namespace sparkglm
