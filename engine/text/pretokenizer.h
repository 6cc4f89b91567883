#pragma once
// Pre-tokenization for Hugging Face byte-level BPE tokenizers: a segment of text (what lies
// between added tokens) is cut into the pieces that BPE merges within. `tokenizers` does this
// with Oniguruma regexes; real checkpoints ship only a handful of patterns, so each known
// pattern is a hand-written matcher picked by its exact string, and any other pattern is an
// Error rather than a silent approximation.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sparkglm {

enum class SplitPattern {
  // GPT-2, and what ByteLevel(use_regex=true) applies:
  //   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // cl100k as written for Llama-3 and the GLM-4 family (GLM-4.5, GLM-4.6):
  //   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kCl100k,
  // The same with single digits, \p{N} for \p{N}{1,3} (Qwen2).
  kCl100kSingleDigit,
};

// The regex of a pattern as tokenizer.json spells it (after JSON unescaping).
std::string_view split_pattern_regex(SplitPattern pattern);

// The pattern whose regex is exactly `regex`; an Error naming the regex if it is none of them.
SplitPattern split_pattern_from_regex(std::string_view regex);

// Appends the pieces that Split(pattern, behavior=Isolated) cuts `text` into: views into `text`
// that cover it in order. Bytes that are not valid UTF-8 count as one "other" character each,
// so any byte string splits (tokenizers itself only ever sees valid UTF-8).
void split_by_pattern(SplitPattern pattern, std::string_view text,
                      std::vector<std::string_view>& pieces);

// The pre_tokenizer of a tokenizer.json: Split(Regex) stages applied one after another, then one
// ByteLevel stage (optional prefix space, optional GPT-2 split). The byte-to-unicode mapping
// that ByteLevel also does is left to the BPE model, so pieces stay raw bytes.
class Pretokenizer {
 public:
  // Accepts {"type": "ByteLevel", ...} or {"type": "Sequence", "pretokenizers": [Split...,
  // ByteLevel]} with Split {"pattern": {"Regex": ...}, "behavior": "Isolated", "invert": false}.
  static Pretokenizer from_json(const nlohmann::json& node);
  static Pretokenizer byte_level(bool add_prefix_space, bool use_regex);

  // Replaces `pieces` with the pieces of one segment, in order; empty pieces are dropped.
  void split(std::string_view segment, std::vector<std::string>& pieces) const;

 private:
  struct Stage {
    bool byte_level = false;
    SplitPattern pattern = SplitPattern::kGpt2;  // for a Split stage
    bool add_prefix_space = false;               // for the ByteLevel stage
    bool use_regex = false;                      // for the ByteLevel stage: split by kGpt2
  };
  std::vector<Stage> stages_;
};

}  // namespace sparkglm
