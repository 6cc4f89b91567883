#include "tinyglm/dummy_tokenizer.h"

#include <array>
#include <cctype>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/text/utf8.h"

namespace sparkglm {
namespace {

// GLM's special tokens in GLM-4.5's published order (tokenizer_config.json's added_tokens_decoder
// from <|endoftext|> on); GLM-5.3-Flash's eos ids 154820, 154827, 154829 are its offsets 0, 7, 9.
constexpr std::array<const char*, 36> kGlmSpecials = {"<|endoftext|>",
                                                      "[MASK]",
                                                      "[gMASK]",
                                                      "[sMASK]",
                                                      "<sop>",
                                                      "<eop>",
                                                      "<|system|>",
                                                      "<|user|>",
                                                      "<|assistant|>",
                                                      "<|observation|>",
                                                      "<|begin_of_image|>",
                                                      "<|end_of_image|>",
                                                      "<|begin_of_video|>",
                                                      "<|end_of_video|>",
                                                      "<|begin_of_audio|>",
                                                      "<|end_of_audio|>",
                                                      "<|begin_of_transcription|>",
                                                      "<|end_of_transcription|>",
                                                      "<|code_prefix|>",
                                                      "<|code_middle|>",
                                                      "<|code_suffix|>",
                                                      "<think>",
                                                      "</think>",
                                                      "<tool_call>",
                                                      "</tool_call>",
                                                      "<tool_response>",
                                                      "</tool_response>",
                                                      "<arg_key>",
                                                      "</arg_key>",
                                                      "<arg_value>",
                                                      "</arg_value>",
                                                      "/nothink",
                                                      "<|begin_of_box|>",
                                                      "<|end_of_box|>",
                                                      "<|image|>",
                                                      "<|video|>"};

constexpr const char* kCl100kPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-2's byte-level spelling of each byte: printable Latin-1 stands for itself, the other bytes
// for U+0100 onwards in byte order.
std::array<std::string, 256> byte_spellings() {
  std::array<std::string, 256> out;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    append_utf8(out[size_t(b)], char32_t(printable ? b : next++));
  }
  return out;
}

// Assigns ids to merges in rank order until `budget` tokens exist.
class MergeList {
 public:
  MergeList(nlohmann::json& vocab, nlohmann::json& merges, int budget)
      : vocab_(vocab), merges_(merges), budget_(budget) {}
  bool full() const { return next_id_ >= budget_; }
  void add(const std::string& left, const std::string& right) {
    if (full()) return;
    SPARKGLM_ASSERT(!vocab_.contains(left + right), "merge enumerated twice: " + left + right);
    merges_.push_back(left + " " + right);
    vocab_[left + right] = next_id_++;
  }
  // Another split of a token that exists: BPE may reach a word through either split, depending
  // on which of its pairs outranked the others, so each split gets its merge.
  void also(const std::string& left, const std::string& right) {
    if (vocab_.contains(left + right) && vocab_.contains(left) && vocab_.contains(right))
      merges_.push_back(left + " " + right);
  }

 private:
  nlohmann::json& vocab_;
  nlohmann::json& merges_;
  int budget_;
  int next_id_ = 256;
};

std::vector<std::string> spelled(const std::array<std::string, 256>& bytes, std::string_view raw) {
  std::vector<std::string> out;
  for (unsigned char ch : raw) out.push_back(bytes[ch]);
  return out;
}

}  // namespace

std::string dummy_tokenizer_json(const ModelConfig& config) {
  const int first_special = config.eos_token_ids.empty() ? -1 : config.eos_token_ids[0];
  if (first_special < 256 || first_special + int(kGlmSpecials.size()) > config.vocab_size)
    throw Error(ErrorKind::kInvalidConfig,
                "a byte-level BPE vocabulary needs eos_token_ids[0] (<|endoftext|>) in [256, " +
                    std::to_string(config.vocab_size - int(kGlmSpecials.size())) +
                    "] to fit 256 bytes below and GLM's " + std::to_string(kGlmSpecials.size()) +
                    " special tokens below vocab_size " + std::to_string(config.vocab_size));
  const auto bytes = byte_spellings();
  nlohmann::json vocab = nlohmann::json::object();
  nlohmann::json merges = nlohmann::json::array();
  for (int b = 0; b < 256; ++b) vocab[bytes[size_t(b)]] = b;
  MergeList m(vocab, merges, first_special);

  std::string ascii = " abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789\n\t";
  for (int ch = '!'; ch <= '~'; ++ch)
    if (!std::isalnum(ch)) ascii += char(ch);
  const auto chars = spelled(bytes, ascii);  // 97
  for (const auto& x : chars)
    for (const auto& y : chars) m.add(x, y);
  for (int lead = 0xC2; lead <= 0xDF; ++lead)
    for (int cont = 0x80; cont <= 0xBF; ++cont) m.add(bytes[size_t(lead)], bytes[size_t(cont)]);
  for (int lead = 0xE0; lead <= 0xEF; ++lead)
    for (int cont = 0x80; cont <= 0xBF; ++cont) m.add(bytes[size_t(lead)], bytes[size_t(cont)]);
  for (int lead = 0xE0; lead <= 0xEF; ++lead)
    for (int c1 = 0x80; c1 <= 0xBF; ++c1)
      for (int c2 = 0x80; c2 <= 0xBF; ++c2)
        m.add(bytes[size_t(lead)] + bytes[size_t(c1)], bytes[size_t(c2)]);
  const auto lower = spelled(bytes, "abcdefghijklmnopqrstuvwxyz");
  std::vector<std::string> bigrams;  // " a".." z", "aa".."zz": merged in step 2
  for (const auto& l : lower) bigrams.push_back(bytes[size_t(' ')] + l);
  for (const auto& a : lower)
    for (const auto& b : lower) bigrams.push_back(a + b);
  // A word's characters as byte-level spellings: the first may be the space.
  auto first = [&](const std::string& gram) {
    return gram.rfind(bytes[size_t(' ')], 0) == 0 ? bytes[size_t(' ')] : gram.substr(0, 1);
  };
  std::vector<std::string> trigrams;
  for (const auto& bg : bigrams)
    for (const auto& l : lower) {
      const std::string tri = bg + l;
      m.add(bg, l);
      m.also(first(tri), tri.substr(first(tri).size()));  // (a, bc)
      trigrams.push_back(tri);
    }
  for (size_t i = 0; i < trigrams.size() && !m.full(); ++i)
    for (const auto& l : lower) {
      const std::string quad = trigrams[i] + l;
      const std::string a = first(quad), rest = quad.substr(a.size());  // rest: 3 letters
      m.add(trigrams[i], l);
      m.also(a + rest.substr(0, 1), rest.substr(1));  // (ab, cd)
      m.also(a, rest);                                // (a, bcd)
    }
  if (!m.full())
    throw Error(ErrorKind::kInvalidConfig,
                "eos_token_ids[0] " + std::to_string(first_special) +
                    ": more ids below the special tokens than the enumerated merges fill");

  nlohmann::json added = nlohmann::json::array();
  for (int id = first_special; id < config.vocab_size; ++id) {
    const size_t k = size_t(id - first_special);
    const std::string content =
        k < kGlmSpecials.size() ? std::string(kGlmSpecials[k])
                                : "<|reserved_" + std::to_string(k - kGlmSpecials.size()) + "|>";
    added.push_back({{"id", id},
                     {"content", content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  const nlohmann::json byte_level{{"type", "ByteLevel"},
                                  {"add_prefix_space", false},
                                  {"trim_offsets", false},
                                  {"use_regex", false}};
  const nlohmann::json split{{"type", "Split"},
                             {"pattern", {{"Regex", kCl100kPattern}}},
                             {"behavior", "Isolated"},
                             {"invert", false}};
  const nlohmann::json tok{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}}},
      {"post_processor", nullptr},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merges}}},
  };
  return tok.dump() + "\n";
}

std::string dummy_tokenizer_config_json(const ModelConfig& config) {
  const nlohmann::json cfg{
      {"tokenizer_class", "PreTrainedTokenizerFast"},
      {"eos_token", "<|endoftext|>"},
      {"pad_token", "<|endoftext|>"},
      {"model_max_length", config.max_position_embeddings},
      {"clean_up_tokenization_spaces", false},
      {"sparkglm_vocabulary", "dummy byte-level BPE (tinyglm/dummy_tokenizer.h)"}};
  return cfg.dump(2) + "\n";
}

}  // namespace sparkglm
