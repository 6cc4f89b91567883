#pragma once
// The tinyGLM tokenizer: one token per byte (ids 0..255) followed by GLM's special tokens, in
// GLM's own order, so eos ids and chat rendering mirror the real vocabulary. Any byte string
// round-trips: decode(encode(s)) == s.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sparkglm {

class ByteTokenizer {
 public:
  static constexpr int kEndOfText = 256;        // <|endoftext|>
  static constexpr int kMask = 257;             // [MASK]
  static constexpr int kGMask = 258;            // [gMASK]
  static constexpr int kSMask = 259;            // [sMASK]
  static constexpr int kSop = 260;              // <sop>
  static constexpr int kEop = 261;              // <eop>
  static constexpr int kSystem = 262;           // <|system|>
  static constexpr int kUser = 263;             // <|user|>
  static constexpr int kAssistant = 264;        // <|assistant|>
  static constexpr int kObservation = 265;      // <|observation|>
  static constexpr int kThink = 266;            // <think>
  static constexpr int kEndThink = 267;         // </think>
  static constexpr int kToolCall = 268;         // <tool_call>
  static constexpr int kEndToolCall = 269;      // </tool_call>
  static constexpr int kToolResponse = 270;     // <tool_response>
  static constexpr int kEndToolResponse = 271;  // </tool_response>
  static constexpr int kArgKey = 272;           // <arg_key>
  static constexpr int kEndArgKey = 273;        // </arg_key>
  static constexpr int kArgValue = 274;         // <arg_value>
  static constexpr int kEndArgValue = 275;      // </arg_value>
  static constexpr int kFirstReserved = 276;
  static constexpr int kVocabSize = 320;  // padded to a multiple of 64; 276..319 are reserved

  // The text of a special token, or nullopt for a byte or reserved id.
  static std::optional<std::string_view> special_text(int id);
  // Special token id for an exact special text ("<think>"), or nullopt.
  static std::optional<int> special_id(std::string_view text);

  // With parse_special, exact special-token texts in `text` become their ids; every other byte
  // becomes its byte id.
  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;
  // Bytes for byte ids, the text for special ids; reserved ids decode to nothing unless
  // skip_special is false, where they render as "<|reserved_N|>".
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
  std::string token_text(int32_t id) const;  // the piece one id decodes to

  // A Hugging Face tokenizer.json (byte-level BPE without merges, specials as added tokens) and
  // tokenizer_config.json describing this vocabulary, for checkpoint directories.
  static std::string hf_tokenizer_json();
  static std::string hf_tokenizer_config_json();
};

}  // namespace sparkglm
