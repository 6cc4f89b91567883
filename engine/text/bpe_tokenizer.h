#pragma once
// A Hugging Face tokenizer.json loader for byte-level BPE tokenizers, the kind GLM-4.5/GLM-5
// checkpoints ship. encode() gives the ids of the `tokenizers` package (without a
// post-processor's template: the chat template adds [gMASK]<sop> itself):
//   1. added tokens are cut out of the raw text (added_vocabulary.h);
//   2. the text between them is split by the pre-tokenizer's pattern (pretokenizer.h);
//   3. each piece's bytes become GPT-2's byte-level characters and are merged by rank.
// Any byte string round-trips: decode(encode(s)) == s, invalid UTF-8 included.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "engine/text/added_vocabulary.h"
#include "engine/text/pretokenizer.h"

namespace sparkglm {

class BpeTokenizer {
 public:
  // Errors: kIo when the file cannot be read, kInvalidCheckpoint when it is malformed (naming
  // the field), kUnsupported for a model, normalizer, pattern or option this build lacks.
  static BpeTokenizer load(const std::string& tokenizer_json_path);
  // The same from the file's text; `where` names it in errors.
  static BpeTokenizer parse(const std::string& tokenizer_json, const std::string& where);

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer();

  // With parse_special false, special tokens' texts are tokenized as ordinary text (non-special
  // added tokens are still matched, as in `tokenizers`). Safe to call from several threads.
  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;
  // The bytes the ids stand for, concatenated; not necessarily valid UTF-8 when the ids cut a
  // character. Ids that name no token are skipped, like `tokenizers` does.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;

  // Tokens are spelled as tokenizer.json spells them: byte-level ("Ġthe") for the vocabulary,
  // verbatim for added tokens.
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  // One past the largest id, vocabulary and added tokens together.
  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  // Ids of the special added tokens, ascending.
  const std::vector<int32_t>& special_ids() const { return special_ids_; }

 private:
  struct Merge {
    int32_t rank;  // position in model.merges: lower merges first
    int32_t id;    // the merged token
  };
  struct PieceCache;

  BpeTokenizer();
  void load_model(const nlohmann::json& model);
  void load_added_tokens(const nlohmann::json& added_tokens);
  void encode_piece(std::string_view piece, std::vector<int32_t>& ids) const;
  void merge(std::vector<int32_t>& symbols) const;

  Pretokenizer pretokenizer_;
  AddedVocabulary added_;
  std::unordered_map<std::string, int32_t> vocab_;      // the model's vocabulary, byte-level
  std::unordered_map<std::string, int32_t> added_ids_;  // added token content -> id
  std::unordered_map<uint64_t, Merge> merges_;          // key: left id << 32 | right id
  // The symbols one byte starts as: its byte-level character's id, else its <0xXX> byte-fallback
  // ids, else the unk id, else nothing (the byte is dropped, as `tokenizers` does).
  std::array<std::vector<int32_t>, 256> byte_symbols_;
  std::array<bool, 256> byte_is_unk_{};
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;            // a piece that is itself in the vocabulary is one token
  std::vector<std::string> tokens_;       // id -> token; empty for an unused id
  std::vector<std::string> token_bytes_;  // id -> the bytes decode() emits
  std::vector<uint8_t> special_;          // id -> 1 for a special added token
  std::vector<int32_t> special_ids_;
  std::unique_ptr<PieceCache> cache_;  // piece bytes -> ids; behind a pointer for its mutex
};

}  // namespace sparkglm
