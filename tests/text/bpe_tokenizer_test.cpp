#include "engine/text/bpe_tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "engine/core/error.h"

namespace sparkglm {
namespace {

using Ids = std::vector<int32_t>;
using nlohmann::json;

// GPT-2's byte-to-unicode character for byte b, spelled out independently of the loader.
std::string byte_char(int b) {
  int cp = b, next = 256;
  for (int x = 0; x < 256; ++x) {
    const bool printable = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174);
    if (!printable && x == b) cp = next;
    if (!printable) ++next;
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// A tokenizer.json with one token per byte (id = byte value) and the merges a test adds; the
// pre-tokenizer is GLM's (cl100k Split, then ByteLevel).
struct TinyTokenizer {
  json j;
  int32_t next_id = 256;

  TinyTokenizer() {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
    json split = json::object();
    split["type"] = "Split";
    split["pattern"]["Regex"] = std::string(split_pattern_regex(SplitPattern::kCl100k));
    split["behavior"] = "Isolated";
    split["invert"] = false;
    j = json::parse(R"({
      "version": "1.0", "added_tokens": [], "normalizer": null, "post_processor": null,
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": []},
      "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true},
      "model": {"type": "BPE", "dropout": null, "unk_token": null, "fuse_unk": false,
                "byte_fallback": false, "ignore_merges": false, "merges": []}})");
    j["model"]["vocab"] = vocab;
    j["pre_tokenizer"]["pretokenizers"] =
        json::array({split, json::parse(R"({"type": "ByteLevel", "add_prefix_space": false,
                                "trim_offsets": true, "use_regex": false})")});
  }

  // Adds the merge of two byte-level tokens; returns the merged token's id.
  int32_t merge(const std::string& left, const std::string& right) {
    const int32_t id = next_id++;
    j["model"]["vocab"][left + right] = id;
    j["model"]["merges"].push_back(left + " " + right);
    return id;
  }

  void add(const std::string& content, int32_t id, bool special, bool lstrip = false,
           bool rstrip = false, bool normalized = false) {
    j["added_tokens"].push_back({{"id", id},
                                 {"content", content},
                                 {"single_word", false},
                                 {"lstrip", lstrip},
                                 {"rstrip", rstrip},
                                 {"normalized", normalized},
                                 {"special", special}});
  }

  std::string write(const std::string& name) const {
    const std::string path = ::testing::TempDir() + "bpe_tokenizer_test_" + name + ".json";
    std::ofstream(path) << j.dump();
    return path;
  }
  BpeTokenizer load(const std::string& name) const { return BpeTokenizer::load(write(name)); }
};

Ids bytes_of(std::string_view s) {
  Ids ids;
  for (char c : s) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

// A tokenizer.json claiming 8 GiB (sparse: no disk) is refused by its size before it is read whole.
TEST(BpeTokenizer, HugeFileIsRefusedBeforeItIsRead) {
  const std::string path = ::testing::TempDir() + "bpe_tokenizer_test_huge.json";
  std::ofstream(path) << "{}";
  std::filesystem::resize_file(path, uintmax_t(8) << 30);
  try {
    BpeTokenizer::load(path);
    ADD_FAILURE() << "an 8 GiB tokenizer.json was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidCheckpoint);
    EXPECT_EQ(e.message(), path +
                               ": 8589934592 bytes, larger than the limit of 536870912 bytes "
                               "for this JSON file");
  }
  std::filesystem::remove(path);
}

// A tokenizer.json whose fields nest far deeper than any real one (issue 14: it crashed `serve`) is
// refused at load by name, before anything walks it.
TEST(BpeTokenizer, DeeplyNestedFileFailsAtLoadWithANamedError) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string text = TinyTokenizer().j.dump();
  text.pop_back();
  text += ", \"post_processor\": " + deep + "}";
  const std::string path = ::testing::TempDir() + "bpe_tokenizer_test_deep.json";
  std::ofstream(path) << text;
  try {
    BpeTokenizer::load(path);
    ADD_FAILURE() << "a tokenizer.json nested 100,000 deep was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidCheckpoint);
    EXPECT_EQ(e.message(), "tokenizer.json '" + path + "': JSON nested deeper than 32 levels");
  }
}

TEST(BpeTokenizer, MergesApplyByRankNotByPosition) {
  TinyTokenizer t;
  const int32_t bc = t.merge("b", "c");  // rank 0
  t.merge("a", "b");                     // rank 1
  EXPECT_EQ(t.load("rank").encode("abc"), (Ids{'a', bc}));

  TinyTokenizer reversed;
  const int32_t ab = reversed.merge("a", "b");
  reversed.merge("b", "c");
  EXPECT_EQ(reversed.load("rank_reversed").encode("abc"), (Ids{ab, 'c'}));

  // Equal ranks resolve leftmost first.
  TinyTokenizer same;
  const int32_t aa = same.merge("a", "a");
  EXPECT_EQ(same.load("leftmost").encode("aaa"), (Ids{aa, 'a'}));
}

TEST(BpeTokenizer, MergesChainIntoWordsWithinPieces) {
  TinyTokenizer t;
  t.merge("h", "e");
  t.merge("l", "l");
  const int32_t hell = t.merge("he", "ll");
  const int32_t o_space = t.merge("o", "Ġ");  // Ġ stands for the space byte
  const int32_t hello = t.merge("hell", "o");
  const int32_t space_w = t.merge("Ġ", "w");
  const auto tok = t.load("chain");
  // The pre-tokenizer ends "hello" before the space, so "oĠ" cannot merge despite its rank.
  EXPECT_EQ(tok.encode("hello world"), (Ids{hello, space_w, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(tok.decode(tok.encode("hello world")), "hello world");

  // Without the Split stage the whole text is one piece, and "oĠ" outranks "hello".
  t.j["pre_tokenizer"] = json::parse(R"({"type": "ByteLevel", "add_prefix_space": false,
                                         "use_regex": false})");
  EXPECT_EQ(t.load("chain_no_split").encode("hello world"),
            (Ids{hell, o_space, 'w', 'o', 'r', 'l', 'd'}));
}

TEST(BpeTokenizer, UnseenCharactersFallBackToTheirBytes) {
  const auto tok = TinyTokenizer().load("bytes");
  const std::string text = "é🙂漢";
  EXPECT_EQ(tok.encode(text), bytes_of(text));
  EXPECT_EQ(tok.decode(tok.encode(text)), text);
}

TEST(BpeTokenizer, DecodeRoundTripsAnyBytesValidUtf8OrNot) {
  TinyTokenizer t;
  t.merge("Ġ", "Ġ");
  t.merge("e", "r");
  t.add("<|user|>", 300, true);
  t.add("<think", 301, false, false, false, true);
  const auto tok = t.load("round_trip");
  std::mt19937 rng(5);
  for (int trial = 0; trial < 500; ++trial) {
    std::string s(rng() % 80, '\0');
    for (auto& ch : s) ch = static_cast<char>(trial % 2 ? rng() % 256 : 32 + rng() % 96);
    if (trial % 5 == 0) s += "<|user|>";
    EXPECT_EQ(tok.decode(tok.encode(s)), s);
    EXPECT_EQ(tok.decode(tok.encode(s, /*parse_special=*/false)), s);
  }
  for (std::string s : {"\xff\xfe", "\xc3", "a\xed\xa0\x80z", "\xf0\x9f\x99", "\xc0\xaf",
                        "héllo wörld — 你好, 🙂 <think>x</think>"})
    EXPECT_EQ(tok.decode(tok.encode(s)), s);
}

TEST(BpeTokenizer, AddedTokensAreCutOutLongestFirst) {
  TinyTokenizer t;
  t.add("<|user|>", 300, true);
  t.add("<think>", 301, true);
  t.add("<think", 302, false, false, false, /*normalized=*/true);
  t.add("[gMASK]", 303, true);
  const auto tok = t.load("added");
  EXPECT_EQ(tok.encode("[gMASK]<|user|>hi<think>x"), (Ids{303, 300, 'h', 'i', 301, 'x'}));
  // Special tokens stay text without parse_special; the non-special "<think" still matches.
  Ids plain = bytes_of("<|user|>");
  plain.insert(plain.end(), {302, '>'});
  EXPECT_EQ(tok.encode("<|user|><think>", /*parse_special=*/false), plain);
  EXPECT_EQ(tok.decode({303, 'h', 302, 301}, /*skip_special=*/true), "h<think");
  EXPECT_EQ(tok.decode({303, 'h', 302, 301}), "[gMASK]h<think<think>");
  EXPECT_EQ(tok.special_ids(), (Ids{300, 301, 303}));
}

TEST(BpeTokenizer, StrippingTokensSwallowNeighbouringWhiteSpace) {
  TinyTokenizer t;
  t.add("<mask>", 310, true, /*lstrip=*/true);
  t.add("<pad>", 311, false, false, /*rstrip=*/true);
  const auto tok = t.load("strip");
  EXPECT_EQ(tok.encode("a  <mask>b"), (Ids{'a', 310, 'b'}));
  EXPECT_EQ(tok.encode("a\u3000<mask>"), (Ids{'a', 310}));  // U+3000 is white space
  EXPECT_EQ(tok.encode("<pad>  \n x"), (Ids{311, 'x'}));
  EXPECT_EQ(tok.encode("a<pad>"), (Ids{'a', 311}));
}

TEST(BpeTokenizer, UnknownBytesBecomeUnkFusedOrNot) {
  TinyTokenizer t;
  t.j["model"]["vocab"].erase("z");
  t.j["model"]["vocab"]["<unk>"] = 256;
  t.j["model"]["unk_token"] = "<unk>";
  EXPECT_EQ(t.load("unk").encode("azzb"), (Ids{'a', 256, 256, 'b'}));
  t.j["model"]["fuse_unk"] = true;
  EXPECT_EQ(t.load("unk_fused").encode("azzb"), (Ids{'a', 256, 'b'}));
}

TEST(BpeTokenizer, IgnoreMergesTakesWholePiecesFromTheVocabulary) {
  TinyTokenizer t;
  t.j["model"]["vocab"]["abc"] = 256;
  EXPECT_EQ(t.load("merges_used").encode("abc"), (Ids{'a', 'b', 'c'}));
  t.j["model"]["ignore_merges"] = true;
  EXPECT_EQ(t.load("merges_ignored").encode("abc"), (Ids{256}));
}

TEST(BpeTokenizer, VocabularyLookups) {
  TinyTokenizer t;
  t.add("<|user|>", 300, true);
  const auto tok = t.load("lookups");
  EXPECT_EQ(tok.vocab_size(), 301);
  EXPECT_EQ(tok.token_to_id("Ġ"), 32);
  EXPECT_EQ(tok.token_to_id("<|user|>"), 300);
  EXPECT_EQ(tok.token_to_id("nope"), std::nullopt);
  EXPECT_EQ(tok.id_to_token(32), "Ġ");
  EXPECT_EQ(tok.id_to_token(299), std::nullopt);  // an id no token has
  EXPECT_EQ(tok.id_to_token(-1), std::nullopt);
  EXPECT_EQ(tok.decode({'a', 299, 5000, -3, 'b'}), "ab");  // unknown ids are skipped
}

TEST(BpeTokenizer, MalformedFilesAreErrorsNamingTheField) {
  EXPECT_THROW(BpeTokenizer::load(::testing::TempDir() + "no_such_tokenizer.json"), Error);
  struct Case {
    std::function<void(json&)> mutate;
    ErrorKind kind;
    std::string names;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["model"]["type"] = "WordPiece"; }, ErrorKind::kUnsupported, "model.type"},
      {[](json& j) { j["model"].erase("type"); }, ErrorKind::kInvalidCheckpoint, "model.type"},
      {[](json& j) { j.erase("model"); }, ErrorKind::kInvalidCheckpoint, "model"},
      {[](json& j) { j["model"].erase("vocab"); }, ErrorKind::kInvalidCheckpoint, "model.vocab"},
      {[](json& j) { j["model"]["vocab"] = json::object(); }, ErrorKind::kInvalidCheckpoint,
       "model.vocab: is empty"},
      {[](json& j) { j["model"]["vocab"]["q"] = -4; }, ErrorKind::kInvalidCheckpoint,
       "model.vocab[\"q\"]"},
      {[](json& j) { j["model"]["vocab"]["q"] = 7; }, ErrorKind::kInvalidCheckpoint, "id 7"},
      {[](json& j) { j["model"].erase("merges"); }, ErrorKind::kInvalidCheckpoint, "model.merges"},
      {[](json& j) { j["model"]["merges"] = json::array({"a zz"}); }, ErrorKind::kInvalidCheckpoint,
       "model.merges[0]"},
      {[](json& j) { j["model"]["merges"] = json::array({"a b"}); }, ErrorKind::kInvalidCheckpoint,
       "merged token \"ab\""},
      {[](json& j) { j["model"]["merges"] = json::array({7}); }, ErrorKind::kInvalidCheckpoint,
       "model.merges[0]"},
      {[](json& j) { j["model"]["dropout"] = 0.1; }, ErrorKind::kUnsupported, "model.dropout"},
      {[](json& j) { j["model"]["unk_token"] = "<nope>"; }, ErrorKind::kInvalidCheckpoint,
       "model.unk_token"},
      {[](json& j) { j["added_tokens"] = json::parse(R"([{"content": "x"}])"); },
       ErrorKind::kInvalidCheckpoint, "added_tokens[0].id"},
      {[](json& j) { j["added_tokens"] = json::parse(R"([{"id": 300}])"); },
       ErrorKind::kInvalidCheckpoint, "added_tokens[0].content"},
      {[](json& j) { j["normalizer"] = json::parse(R"({"type": "NFC"})"); },
       ErrorKind::kUnsupported, "normalizer"},
      {[](json& j) { j.erase("pre_tokenizer"); }, ErrorKind::kInvalidCheckpoint, "pre_tokenizer"},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+|\\s+"; },
       ErrorKind::kUnsupported, "\"\\\\w+|\\\\s+\""},
      {[](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; },
       ErrorKind::kUnsupported, "pre_tokenizer.pretokenizers[0].behavior"},
      {[](json& j) { j["decoder"] = json::parse(R"({"type": "Metaspace"})"); },
       ErrorKind::kUnsupported, "decoder"},
      // A "type" of another JSON type (found by json_inputs_fuzz: a typed read threw).
      {[](json& j) { j["decoder"] = json::parse(R"({"type": ["a b"]})"); }, ErrorKind::kUnsupported,
       "decoder"},
      {[](json& j) { j["decoder"] = json::parse(R"({"kind": "ByteLevel"})"); },
       ErrorKind::kUnsupported, "decoder"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    TinyTokenizer t;
    cases[i].mutate(t.j);
    try {
      t.load("malformed_" + std::to_string(i));
      ADD_FAILURE() << "case " << i << " (" << cases[i].names << ") loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), cases[i].kind) << e.what();
      EXPECT_NE(e.message().find(cases[i].names), std::string::npos) << e.what();
      EXPECT_NE(e.message().find("bpe_tokenizer_test_malformed_"), std::string::npos) << e.what();
    }
  }
  const std::string path = ::testing::TempDir() + "bpe_tokenizer_test_not_json.json";
  std::ofstream(path) << "{\"model\": ";
  try {
    BpeTokenizer::load(path);
    ADD_FAILURE() << "truncated JSON loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidCheckpoint) << e.what();
  }
}

}  // namespace
}  // namespace sparkglm
