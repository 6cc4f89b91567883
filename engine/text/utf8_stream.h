#pragma once
// Incremental detokenization: a byte-level tokenizer can end a token in the middle of a UTF-8
// character ("🙂" is four bytes, often two tokens), and a client must never see half of one.
// feed() takes the bytes of each generated token and returns only whole characters, holding back
// an incomplete trailing sequence; flush() at the end releases what is left.
//
// Ill-formed bytes become U+FFFD as soon as they are known to be ill-formed (mid-stream, or at
// flush for a truncated tail), one per maximal ill-formed subpart as Unicode recommends, which is
// what Python's bytes.decode(errors="replace") and Hugging Face tokenizers' decode produce.
// Overlong forms, surrogates (ED A0..BF) and code points above U+10FFFF are ill-formed.
#include <string>
#include <string_view>

namespace sparkglm {

class Utf8Stream {
 public:
  std::string feed(std::string_view bytes);
  std::string flush();

  size_t held_bytes() const { return held_.size(); }

 private:
  std::string held_;  // at most 3 bytes: the well-formed start of one character
};

// All of `bytes` at once, as feed() then flush() would give them: text any JSON writer accepts,
// whatever bytes a model, a file or a truncation left in it.
std::string valid_utf8(std::string_view bytes);

}  // namespace sparkglm
