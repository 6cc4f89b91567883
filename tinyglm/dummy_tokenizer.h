#pragma once
// A deterministic byte-level BPE tokenizer.json for a model whose vocabulary is not the byte
// vocabulary (glm-5.3-flash: 154,880 ids), so that every id a dummy-weight model samples decodes to
// text. Not trained: the merges are enumerated, in this rank order, until the ids below GLM's first
// special token are used up:
//   1. ids 0..255: one byte each (GPT-2's byte-level characters, id = byte value);
//   2. every pair of 97 ASCII characters (space, letters, digits, punctuation, newline, tab);
//   3. every two-byte UTF-8 sequence (lead C2..DF), then every three-byte one (E0..EF), first its
//      two-byte prefix, so Latin, Greek, Cyrillic and the whole BMP (CJK) are one token a
//      character;
//   4. lower-case letter trigrams, with and without a leading space; then their four-letter
//      extensions, until the budget is spent.
// The pre-tokenizer is GLM-4's (Split on the cl100k pattern, then ByteLevel without its regex),
// the decoder ByteLevel. The added tokens follow the byte vocabulary's: GLM's special tokens in
// GLM's order from config.eos_token_ids[0] (<|endoftext|>; <|user|> and <|observation|> then land
// on the other eos ids), then "<|reserved_N|>" up to vocab_size.
#include <string>

#include "engine/model/config.h"

namespace sparkglm {

// Error(kInvalidConfig) when the vocabulary leaves no room for the bytes below the specials, or
// for the specials below vocab_size.
std::string dummy_tokenizer_json(const ModelConfig& config);
std::string dummy_tokenizer_config_json(const ModelConfig& config);

}  // namespace sparkglm
