#pragma once
// The added tokens of a Hugging Face tokenizer ([gMASK], <|user|>, <think>, ...): they are cut
// out of the raw text before pre-tokenization, so BPE never sees them. Matching follows the
// `tokenizers` package: leftmost match, longest token at that position, tokens with
// normalized=false first over the whole text and normalized ones within what is left.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sparkglm {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;     // control token: skipped by decode(skip_special), by encode's
                            // parse_special=false left as plain text
  bool lstrip = false;      // also swallows the white space before it
  bool rstrip = false;      // also swallows the white space after it
  bool normalized = false;  // matched after the normalizer (second pass) rather than before
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  explicit AddedVocabulary(std::vector<AddedToken> tokens);

  // A stretch of the text: one added token (id >= 0) or ordinary text for the pre-tokenizer
  // (id < 0).
  struct Segment {
    std::string_view text;
    int32_t id;
  };

  // Replaces `segments` with the pieces of `text`, in order, covering it. With parse_special
  // false a special token's text is left as ordinary text.
  void split(std::string_view text, bool parse_special, std::vector<Segment>& segments) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // A byte trie of token contents for leftmost-longest matching.
  struct Trie {
    struct Node {
      std::vector<std::pair<unsigned char, int32_t>> children;
      int32_t token = -1;  // index into tokens_ of the token ending here
    };
    std::vector<Node> nodes{Node{}};
    bool first_byte[256] = {};

    void insert(std::string_view content, int32_t token);
    // The token and length of the longest content starting at text[pos], or token -1.
    int32_t longest_at(std::string_view text, size_t pos, size_t& len) const;
  };

  void find(std::string_view sentence, const Trie& trie, bool parse_special,
            std::vector<Segment>& out) const;

  std::vector<AddedToken> tokens_;
  Trie raw_;         // normalized=false
  Trie normalized_;  // normalized=true
};

}  // namespace sparkglm
