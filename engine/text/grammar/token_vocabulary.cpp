#include "engine/text/grammar/token_vocabulary.h"

#include <algorithm>
#include <numeric>

#include "engine/core/error.h"
#include "engine/text/bpe_tokenizer.h"
#include "engine/text/byte_tokenizer.h"

namespace sparkglm {

namespace {

// Preorder trie from the ids sorted by their bytes: a string's nodes follow its longest common
// prefix with the previous string, and a node's subtree closes when the path leaves it.
void build_trie(const std::vector<std::string>& bytes, TokenVocabulary::Trie& t) {
  std::vector<int32_t> order;
  for (size_t i = 0; i < bytes.size(); ++i)
    if (!bytes[i].empty()) order.push_back(int32_t(i));
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t x, int32_t y) { return bytes[size_t(x)] < bytes[size_t(y)]; });
  std::vector<int32_t> path;  // node index at each depth - 1
  const std::string* prev = nullptr;
  auto close_to = [&](size_t depth) {
    while (path.size() > depth) {
      t.end[size_t(path.back())] = int32_t(t.byte.size());
      path.pop_back();
    }
  };
  for (int32_t id : order) {
    const std::string& s = bytes[size_t(id)];
    size_t lcp = 0;
    if (prev)
      while (lcp < s.size() && lcp < prev->size() && (*prev)[lcp] == s[lcp]) ++lcp;
    close_to(lcp);
    for (size_t k = lcp; k < s.size(); ++k) {
      path.push_back(int32_t(t.byte.size()));
      t.byte.push_back(uint8_t(s[k]));
      t.depth.push_back(int32_t(k + 1));
      t.end.push_back(0);
      t.token_begin.push_back(int32_t(t.ids.size()));
    }
    t.ids.push_back(id);  // its node is the newest on the path: tokens stay in preorder
    prev = &s;
  }
  close_to(0);
  t.token_begin.push_back(int32_t(t.ids.size()));
}

}  // namespace

size_t TokenVocabulary::Trie::memory_bytes() const {
  return byte.capacity() +
         (depth.capacity() + end.capacity() + token_begin.capacity() + ids.capacity()) *
             sizeof(int32_t);
}

TokenVocabulary::TokenVocabulary(int32_t vocab_size, std::vector<std::string> token_bytes,
                                 std::vector<int32_t> eos_ids, int32_t end_reasoning_id,
                                 const std::vector<std::pair<std::string, int32_t>>& tags)
    : vocab_size_(vocab_size) {
  if (vocab_size <= 0 || int64_t(token_bytes.size()) > vocab_size)
    throw Error(ErrorKind::kInvalidArgument,
                "TokenVocabulary: " + std::to_string(token_bytes.size()) +
                    " token byte strings for a vocabulary of " + std::to_string(vocab_size));
  for (int32_t e : eos_ids)
    if (e < 0 || e >= vocab_size)
      throw Error(ErrorKind::kInvalidArgument,
                  "TokenVocabulary: eos id " + std::to_string(e) + " outside the vocabulary");
  auto d = std::make_shared<Data>();
  // eos ids are never text under a grammar, whatever bytes they decode to.
  for (int32_t e : eos_ids)
    if (size_t(e) < token_bytes.size()) token_bytes[size_t(e)].clear();
  if (end_reasoning_id >= 0 && size_t(end_reasoning_id) < token_bytes.size())
    token_bytes[size_t(end_reasoning_id)].clear();
  // 0xFF is never in UTF-8, so no text under a grammar has it: tag bytes start with it, and a
  // token that has it (the byte vocabulary's 0xFF) must not spell a tag.
  for (std::string& b : token_bytes)
    if (b.find(char(0xFF)) != std::string::npos) b.clear();
  if (tags.size() > 200) throw Error(ErrorKind::kInvalidArgument, "TokenVocabulary: over 200 tags");
  for (const auto& [text, id] : tags) {
    if (id < 0 || id >= vocab_size)
      throw Error(ErrorKind::kInvalidArgument, "TokenVocabulary: tag " + text + " has id " +
                                                   std::to_string(id) + " outside the vocabulary");
    if (size_t(id) >= token_bytes.size()) token_bytes.resize(size_t(id) + 1);
    d->tags.push_back(text);
    token_bytes[size_t(id)] = std::string{char(0xFF), char(d->tags.size())};
  }
  d->token_bytes = std::move(token_bytes);
  d->eos_ids = std::move(eos_ids);
  d->end_reasoning_id = end_reasoning_id;
  build_trie(d->token_bytes, d->trie);
  data_ = std::move(d);
}

TokenVocabulary TokenVocabulary::for_byte_tokenizer(int32_t vocab_size,
                                                    std::vector<int32_t> eos_ids) {
  std::vector<std::string> bytes(size_t(std::min(vocab_size, 256)));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::string(1, char(i));
  std::vector<std::pair<std::string, int32_t>> tags;
  for (int id = ByteTokenizer::kToolCall; id <= ByteTokenizer::kEndArgValue; ++id)
    if (id < vocab_size && id != ByteTokenizer::kToolResponse &&
        id != ByteTokenizer::kEndToolResponse)
      tags.emplace_back(std::string(*ByteTokenizer::special_text(id)), id);
  return TokenVocabulary(vocab_size, std::move(bytes), std::move(eos_ids),
                         vocab_size > ByteTokenizer::kEndThink ? ByteTokenizer::kEndThink : -1,
                         tags);
}

TokenVocabulary TokenVocabulary::for_bpe_tokenizer(const BpeTokenizer& tokenizer,
                                                   int32_t vocab_size,
                                                   std::vector<int32_t> eos_ids) {
  const int32_t n = std::min(vocab_size, tokenizer.vocab_size());
  std::vector<std::string> bytes(size_t(std::max(n, 0)));
  std::vector<uint8_t> special(bytes.size(), 0);
  for (int32_t id : tokenizer.special_ids())
    if (id < n) special[size_t(id)] = 1;
  for (int32_t id = 0; id < n; ++id)
    if (!special[size_t(id)]) bytes[size_t(id)] = tokenizer.decode({id});
  const auto end_think = tokenizer.token_to_id("</think>");
  std::vector<std::pair<std::string, int32_t>> tags;
  for (const char* tag :
       {"<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"})
    if (auto id = tokenizer.token_to_id(tag); id && *id < vocab_size) tags.emplace_back(tag, *id);
  return TokenVocabulary(vocab_size, std::move(bytes), std::move(eos_ids),
                         end_think && *end_think < vocab_size ? *end_think : -1, tags);
}

const std::string& TokenVocabulary::bytes(int32_t id) const {
  static const std::string kNone;
  if (!data_ || id < 0 || size_t(id) >= data_->token_bytes.size()) return kNone;
  return data_->token_bytes[size_t(id)];
}

std::optional<std::string> TokenVocabulary::tag_bytes(std::string_view text) const {
  if (!data_) return std::nullopt;
  for (size_t k = 0; k < data_->tags.size(); ++k)
    if (data_->tags[k] == text) return std::string{char(0xFF), char(k + 1)};
  return std::nullopt;
}

bool TokenVocabulary::is_eos(int32_t id) const {
  return std::find(data_->eos_ids.begin(), data_->eos_ids.end(), id) != data_->eos_ids.end();
}

size_t TokenVocabulary::memory_bytes() const {
  if (!data_) return 0;
  size_t n = data_->trie.memory_bytes();
  for (const auto& s : data_->token_bytes) n += sizeof(std::string) + s.capacity();
  return n;
}

}  // namespace sparkglm
