#include "engine/server/token_codec.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "engine/text/bpe_tokenizer.h"
#include "engine/text/byte_tokenizer.h"
#include "tinyglm/dummy_tokenizer.h"

namespace sparkglm::server {

namespace {

// Special tokens that carry structure the text parsers read, so they stay in the output text.
bool is_text_tag(std::string_view text) {
  static const std::unordered_set<std::string_view> kTags = {
      "<think>",          "</think>",  "<tool_call>", "</tool_call>", "<tool_response>",
      "</tool_response>", "<arg_key>", "</arg_key>",  "<arg_value>",  "</arg_value>"};
  return kTags.count(text) > 0;
}

class ByteCodec : public TokenCodec {
 public:
  std::vector<int32_t> encode(std::string_view text) const override { return tok_.encode(text); }
  std::string decode_all(const std::vector<int32_t>& ids) const override {
    return tok_.decode(ids, false);
  }
  std::string token_bytes(int32_t id) const override {
    if (id < 0 || id >= ByteTokenizer::kVocabSize) return "";
    return tok_.token_text(id);
  }
  bool is_control(int32_t id) const override {
    if (id < 256 || id >= ByteTokenizer::kVocabSize) return id >= 256;
    const auto text = ByteTokenizer::special_text(id);
    return !text || !is_text_tag(*text);
  }
  int64_t vocab_size() const override { return ByteTokenizer::kVocabSize; }
  const char* kind() const override { return "byte"; }

 private:
  ByteTokenizer tok_;
};

class BpeCodec : public TokenCodec {
 public:
  explicit BpeCodec(BpeTokenizer tok) : tok_(std::move(tok)) {
    control_.assign(size_t(tok_.vocab_size()), 0);
    for (int32_t id : tok_.special_ids()) {
      const auto text = tok_.id_to_token(id);
      if (!text || !is_text_tag(*text)) control_[size_t(id)] = 1;
    }
  }
  std::vector<int32_t> encode(std::string_view text) const override { return tok_.encode(text); }
  std::string decode_all(const std::vector<int32_t>& ids) const override {
    return tok_.decode(ids, false);
  }
  std::string token_bytes(int32_t id) const override { return tok_.decode({id}, false); }
  bool is_control(int32_t id) const override {
    return id >= 0 && size_t(id) < control_.size() && control_[size_t(id)] != 0;
  }
  int64_t vocab_size() const override { return tok_.vocab_size(); }
  const char* kind() const override { return "bpe"; }

 private:
  BpeTokenizer tok_;
  std::vector<uint8_t> control_;  // id -> 1 for a special token that is not a text tag
};

}  // namespace

std::string TokenCodec::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  if (!skip_special) return decode_all(ids);
  std::vector<int32_t> kept;
  kept.reserve(ids.size());
  for (int32_t id : ids)
    if (!is_control(id)) kept.push_back(id);
  return decode_all(kept);
}

std::unique_ptr<TokenCodec> make_byte_codec() {
  return std::make_unique<ByteCodec>();
}

std::unique_ptr<TokenCodec> make_bpe_codec(const std::string& path) {
  return std::make_unique<BpeCodec>(BpeTokenizer::load(path));
}

std::unique_ptr<TokenCodec> make_bpe_codec_from_json(const std::string& tokenizer_json,
                                                     const std::string& where) {
  return std::make_unique<BpeCodec>(BpeTokenizer::parse(tokenizer_json, where));
}

std::unique_ptr<TokenCodec> codec_for_model_dir(const std::string& dir, int64_t vocab_size) {
  const std::filesystem::path path = std::filesystem::path(dir) / "tokenizer.json";
  if (!std::filesystem::exists(path)) {
    if (vocab_size == ByteTokenizer::kVocabSize) return make_byte_codec();
    throw Error(ErrorKind::kInvalidCheckpoint,
                path.string() + " is missing and the model's vocabulary (" +
                    std::to_string(vocab_size) + " ids) is not the byte vocabulary");
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in) throw Error(ErrorKind::kIo, "cannot read " + path.string());
  // The byte vocabulary's own file is recognised by content, whatever its formatting. Any other
  // file, valid or not, is the BPE loader's to judge and to report on.
  nlohmann::json parsed;
  try {
    parsed = parse_json(bytes.str(), path.string(), ErrorKind::kInvalidCheckpoint,
                        json_limits::kTokenizer);
  } catch (const Error&) {
    // left null: not the byte vocabulary
  }
  if (parsed == parse_json(ByteTokenizer::hf_tokenizer_json(), "the byte vocabulary",
                           ErrorKind::kInvalidCheckpoint, json_limits::kTokenizer))
    return make_byte_codec();
  auto codec = make_bpe_codec(path.string());
  if (codec->vocab_size() > vocab_size)
    throw Error(ErrorKind::kInvalidCheckpoint,
                path.string() + " has " + std::to_string(codec->vocab_size()) +
                    " ids, more than the model's vocab_size " + std::to_string(vocab_size));
  return codec;
}

TokenVocabulary grammar_vocabulary(const TokenCodec& codec, int64_t vocab_size,
                                   std::vector<int32_t> eos_ids) {
  const int64_t n = std::min(vocab_size, codec.vocab_size());
  std::vector<std::string> bytes(size_t(std::max<int64_t>(n, 0)));
  int32_t end_reasoning = -1;
  // The tool-call tags are single tokens the tool-call grammar emits by id (a forced call).
  std::vector<std::pair<std::string, int32_t>> tags;
  for (int32_t id = 0; id < n; ++id) {
    if (codec.is_control(id)) continue;
    std::string b = codec.token_bytes(id);
    if (is_text_tag(b)) {
      if (b == "</think>") end_reasoning = id;
      if (b.find("tool_call>") != std::string::npos || b.find("arg_") != std::string::npos)
        tags.emplace_back(std::move(b), id);
      continue;
    }
    bytes[size_t(id)] = std::move(b);
  }
  return TokenVocabulary(int32_t(vocab_size), std::move(bytes), std::move(eos_ids), end_reasoning,
                         tags);
}

std::unique_ptr<TokenCodec> codec_for_model(const std::string& model_dir, const std::string& preset,
                                            const ModelConfig& config) {
  if (!model_dir.empty()) return codec_for_model_dir(model_dir, config.vocab_size);
  if (config.vocab_size == make_byte_codec()->vocab_size()) return make_byte_codec();
  return make_bpe_codec_from_json(dummy_tokenizer_json(config),
                                  "the generated tokenizer of preset " + preset);
}

}  // namespace sparkglm::server
