#pragma once
// The model's vocabulary as the grammar sees it: the bytes each id stands for, arranged in a byte
// trie laid out in preorder (a node's subtree is the index range [node + 1, end)), so a mask walk
// shares the work of common prefixes and skips a whole subtree when a prefix is refused.
//
// Ids whose bytes are empty are never allowed under a grammar: special tokens (role markers,
// <think>, <tool_call>, ...) must be given empty, and so are ids past the tokenizer's own
// vocabulary (the model's vocabulary may be padded). eos ids are allowed exactly when the value is
// complete. end_reasoning_id is the id of "</think>" (-1: none), after which an after_reasoning
// grammar starts. Copies share one immutable trie.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sparkglm {

class BpeTokenizer;

// Token masks of frames whose trie walk depends only on their node's own parameters (strings and
// numbers), shared by every grammar compiled against one vocabulary, so that a request does not
// walk the whole vocabulary again for a string body an earlier request already walked. Keyed by
// the frame's canonical bytes; at most kBytes, emptied when full. Entries are CompiledGrammar's
// FrameMask (compiled_grammar.h), held type-erased here.
struct SharedFrameMasks {
  static constexpr size_t kBytes = size_t(64) << 20;
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const void>> entries;
  size_t bytes = 0;
};

class TokenVocabulary {
 public:
  struct Trie {
    // [nodes] in preorder; the virtual root (the empty prefix) is not stored: it is index -1.
    std::vector<uint8_t> byte;         // the byte that leads to the node
    std::vector<int32_t> depth;        // bytes from the root (>= 1)
    std::vector<int32_t> end;          // one past the node's subtree
    std::vector<int32_t> token_begin;  // [nodes + 1]: tokens of node i are ids[token_begin[i]..]
    std::vector<int32_t> ids;
    size_t memory_bytes() const;
  };

  TokenVocabulary() = default;
  // token_bytes: [<= vocab_size], the bytes of each id ("" for none); eos ids need no bytes.
  // tags: GLM's tool-call tags ("<tool_call>", "<arg_key>", ...) and their ids, which a tool-call
  // grammar produces; each gets tag_bytes(text) as its bytes.
  TokenVocabulary(int32_t vocab_size, std::vector<std::string> token_bytes,
                  std::vector<int32_t> eos_ids, int32_t end_reasoning_id = -1,
                  const std::vector<std::pair<std::string, int32_t>>& tags = {});

  // tinyGLM's byte tokenizer (ids 0..255 are bytes; specials have no grammar bytes).
  static TokenVocabulary for_byte_tokenizer(int32_t vocab_size, std::vector<int32_t> eos_ids);
  // A tokenizer.json vocabulary: special added tokens have no grammar bytes.
  static TokenVocabulary for_bpe_tokenizer(const BpeTokenizer& tokenizer, int32_t vocab_size,
                                           std::vector<int32_t> eos_ids);

  int32_t vocab_size() const { return vocab_size_; }
  const std::string& bytes(int32_t id) const;
  const std::vector<int32_t>& eos_ids() const { return data_->eos_ids; }
  bool is_eos(int32_t id) const;
  int32_t end_reasoning_id() const { return data_->end_reasoning_id; }
  // The grammar bytes of a registered tag: 0xFF then the tag's number, bytes no text token has;
  // nullopt when the vocabulary has no such tag.
  std::optional<std::string> tag_bytes(std::string_view text) const;
  const Trie& trie() const { return data_->trie; }
  SharedFrameMasks& shared_masks() const { return *data_->shared_masks; }
  size_t memory_bytes() const;

 private:
  struct Data {
    std::vector<std::string> token_bytes;
    std::vector<int32_t> eos_ids;
    int32_t end_reasoning_id = -1;
    std::vector<std::string> tags;  // registered tag texts; tag k's bytes are 0xFF, k + 1
    Trie trie;
    std::shared_ptr<SharedFrameMasks> shared_masks = std::make_shared<SharedFrameMasks>();
  };
  int32_t vocab_size_ = 0;
  std::shared_ptr<const Data> data_;
};

}  // namespace sparkglm
