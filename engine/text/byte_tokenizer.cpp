#include "engine/text/byte_tokenizer.h"

#include <array>

#include <nlohmann/json.hpp>

namespace sparkglm {

namespace {

constexpr std::array<std::string_view, ByteTokenizer::kFirstReserved - ByteTokenizer::kEndOfText>
    kSpecials = {"<|endoftext|>", "[MASK]",          "[gMASK]",         "[sMASK]",
                 "<sop>",         "<eop>",           "<|system|>",      "<|user|>",
                 "<|assistant|>", "<|observation|>", "<think>",         "</think>",
                 "<tool_call>",   "</tool_call>",    "<tool_response>", "</tool_response>",
                 "<arg_key>",     "</arg_key>",      "<arg_value>",     "</arg_value>"};

std::string reserved_text(int id) {
  return "<|reserved_" + std::to_string(id) + "|>";
}

// GPT-2's byte-to-unicode map used by Hugging Face ByteLevel: printable bytes stand for
// themselves, the others are shifted to U+0100 and up, so every byte is a visible character.
std::array<uint32_t, 256> byte_codepoints() {
  std::array<uint32_t, 256> cp{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable =
        (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    cp[b] = printable ? b : next++;
  }
  return cp;
}

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xc0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3f));
  } else {
    s += char(0xe0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3f));
    s += char(0x80 | (cp & 0x3f));
  }
  return s;
}

}  // namespace

std::optional<std::string_view> ByteTokenizer::special_text(int id) {
  if (id >= kEndOfText && id < kFirstReserved) return kSpecials[size_t(id - kEndOfText)];
  return std::nullopt;
}

std::optional<int> ByteTokenizer::special_id(std::string_view text) {
  for (size_t i = 0; i < kSpecials.size(); ++i)
    if (kSpecials[i] == text) return kEndOfText + int(i);
  return std::nullopt;
}

std::vector<int32_t> ByteTokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (parse_special && (text[i] == '<' || text[i] == '[')) {
      int best = -1;
      size_t best_len = 0;
      for (size_t s = 0; s < kSpecials.size(); ++s) {
        const auto& sp = kSpecials[s];
        if (sp.size() > best_len && text.substr(i, sp.size()) == sp) {
          best = kEndOfText + int(s);
          best_len = sp.size();
        }
      }
      if (best < 0 && text.substr(i, 11) == "<|reserved_") {
        for (int id = kFirstReserved; id < kVocabSize; ++id) {
          const std::string r = reserved_text(id);
          if (text.substr(i, r.size()) == r) {
            best = id;
            best_len = r.size();
            break;
          }
        }
      }
      if (best >= 0) {
        ids.push_back(best);
        i += best_len;
        continue;
      }
    }
    ids.push_back(int32_t(static_cast<unsigned char>(text[i])));
    ++i;
  }
  return ids;
}

std::string ByteTokenizer::token_text(int32_t id) const {
  if (id >= 0 && id < 256) return std::string(1, char(id));
  if (auto s = special_text(id)) return std::string(*s);
  if (id >= kFirstReserved && id < kVocabSize) return reserved_text(id);
  return "";
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string out;
  out.reserve(ids.size());
  for (int32_t id : ids) {
    if (skip_special && id >= 256) continue;
    out += token_text(id);
  }
  return out;
}

std::string ByteTokenizer::hf_tokenizer_json() {
  const auto cp = byte_codepoints();
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[utf8(cp[size_t(b)])] = b;
  nlohmann::json added = nlohmann::json::array();
  for (int id = kEndOfText; id < kVocabSize; ++id) {
    const std::string content =
        id < kFirstReserved ? std::string(*special_text(id)) : reserved_text(id);
    added.push_back({{"id", id},
                     {"content", content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  const nlohmann::json tok{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"},
        {"add_prefix_space", false},
        {"trim_offsets", false},
        {"use_regex", false}}},
      {"post_processor", nullptr},
      {"decoder",
       {{"type", "ByteLevel"},
        {"add_prefix_space", false},
        {"trim_offsets", false},
        {"use_regex", false}}},
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
        {"merges", nlohmann::json::array()}}},
  };
  return tok.dump(2) + "\n";
}

std::string ByteTokenizer::hf_tokenizer_config_json() {
  const nlohmann::json cfg{{"tokenizer_class", "PreTrainedTokenizerFast"},
                           {"eos_token", "<|endoftext|>"},
                           {"pad_token", "<|endoftext|>"},
                           {"model_max_length", 1048576},
                           {"clean_up_tokenization_spaces", false},
                           {"sparkglm_vocabulary", "byte-level"}};
  return cfg.dump(2) + "\n";
}

}  // namespace sparkglm
