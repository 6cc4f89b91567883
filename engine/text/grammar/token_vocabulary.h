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
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sparkglm {

class BpeTokenizer;

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
  TokenVocabulary(int32_t vocab_size, std::vector<std::string> token_bytes,
                  std::vector<int32_t> eos_ids, int32_t end_reasoning_id = -1);

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
  const Trie& trie() const { return data_->trie; }
  size_t memory_bytes() const;

 private:
  struct Data {
    std::vector<std::string> token_bytes;
    std::vector<int32_t> eos_ids;
    int32_t end_reasoning_id = -1;
    Trie trie;
  };
  int32_t vocab_size_ = 0;
  std::shared_ptr<const Data> data_;
};

}  // namespace sparkglm
