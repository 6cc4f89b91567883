#pragma once
// The tokenizer as the server uses it, over either vocabulary: the tinyGLM byte tokenizer or a
// checkpoint's Hugging Face tokenizer.json. Beyond encode and decode it says which ids are control
// tokens (role markers, eos, [gMASK]...) whose text a client does not see in generated output;
// the reasoning and tool tags (<think>, </think>, <tool_call>, ...) are text, since the parsers
// read them.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/config.h"
#include "engine/text/grammar/token_vocabulary.h"

namespace sparkglm::server {

class TokenCodec {
 public:
  virtual ~TokenCodec() = default;
  // Special-token texts ("[gMASK]", "<|user|>") become their ids.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // With skip_special, control ids are dropped first (the same rule for every vocabulary).
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const;
  // The bytes one id stands for (not necessarily whole UTF-8 characters); "" for no token.
  virtual std::string token_bytes(int32_t id) const = 0;
  virtual bool is_control(int32_t id) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual const char* kind() const = 0;  // "byte" or "bpe", for the startup log

  // [gMASK]<sop>: what add_special_tokens puts before a prompt.
  std::vector<int32_t> prefix() const { return encode("[gMASK]<sop>"); }

 protected:
  virtual std::string decode_all(const std::vector<int32_t>& ids) const = 0;
};

std::unique_ptr<TokenCodec> make_byte_codec();
// `path` is a tokenizer.json; Error(kIo / kInvalidCheckpoint / kUnsupported) as BpeTokenizer::load.
std::unique_ptr<TokenCodec> make_bpe_codec(const std::string& path);
// The same from a tokenizer.json's text (a preset's generated vocabulary); `where` names it.
std::unique_ptr<TokenCodec> make_bpe_codec_from_json(const std::string& tokenizer_json,
                                                     const std::string& where);
// For a checkpoint directory: its tokenizer.json (the byte vocabulary's own file gives the byte
// codec), or the byte codec when there is none and the model's vocabulary is the byte one.
std::unique_ptr<TokenCodec> codec_for_model_dir(const std::string& dir, int64_t vocab_size);

// The codec of what a runner serves: a checkpoint directory's (codec_for_model_dir), else the
// preset's: the byte codec when the vocabulary is the byte one, else the byte-level BPE vocabulary
// `sparkglm tinyglm make` writes beside such a preset's checkpoint (dummy_tokenizer_json), so that
// every id it samples decodes to text.
std::unique_ptr<TokenCodec> codec_for_model(const std::string& model_dir, const std::string& preset,
                                            const ModelConfig& config);

// The vocabulary as the output grammar sees it: each id's bytes, none for control tokens and for
// the reasoning and tool tags (a constrained value never contains them), "</think>" as the end of
// the reasoning section.
TokenVocabulary grammar_vocabulary(const TokenCodec& codec, int64_t vocab_size,
                                   std::vector<int32_t> eos_ids);

}  // namespace sparkglm::server
