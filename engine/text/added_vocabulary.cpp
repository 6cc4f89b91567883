#include "engine/text/added_vocabulary.h"

#include <algorithm>

#include "engine/text/unicode_tables.h"
#include "engine/text/utf8.h"

namespace sparkglm {

namespace {

// Length of the white space (Unicode White_Space, as Rust's \s) that `s` starts with.
size_t leading_space(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t len;
    if (!is_unicode_white_space(decode_utf8(s, i, len))) break;
    i += len;
  }
  return i;
}

// Where the white space that `s` ends with begins.
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t begin = end - 1;
    while (begin > 0 && end - begin < 4 && (static_cast<unsigned char>(s[begin]) & 0xC0) == 0x80)
      --begin;
    size_t len;
    const char32_t cp = decode_utf8(s, begin, len);
    if (begin + len != end || !is_unicode_white_space(cp)) break;
    end = begin;
  }
  return end;
}

}  // namespace

void AddedVocabulary::Trie::insert(std::string_view content, int32_t token) {
  int32_t node = 0;
  for (char ch : content) {
    const auto b = static_cast<unsigned char>(ch);
    auto& children = nodes[static_cast<size_t>(node)].children;
    auto it =
        std::find_if(children.begin(), children.end(), [b](const auto& c) { return c.first == b; });
    if (it != children.end()) {
      node = it->second;
    } else {
      const auto child = static_cast<int32_t>(nodes.size());
      children.emplace_back(b, child);
      nodes.emplace_back();
      node = child;
    }
  }
  nodes[static_cast<size_t>(node)].token = token;
  first_byte[static_cast<unsigned char>(content[0])] = true;
}

int32_t AddedVocabulary::Trie::longest_at(std::string_view text, size_t pos, size_t& len) const {
  int32_t best = -1;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    const auto& children = nodes[static_cast<size_t>(node)].children;
    auto it =
        std::find_if(children.begin(), children.end(), [b](const auto& c) { return c.first == b; });
    if (it == children.end()) break;
    node = it->second;
    if (nodes[static_cast<size_t>(node)].token >= 0) {
      best = nodes[static_cast<size_t>(node)].token;
      len = i + 1 - pos;
    }
  }
  return best;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;
    (tokens_[i].normalized ? normalized_ : raw_)
        .insert(tokens_[i].content, static_cast<int32_t>(i));
  }
}

void AddedVocabulary::find(std::string_view sentence, const Trie& trie, bool parse_special,
                           std::vector<Segment>& out) const {
  size_t start_offset = 0;  // end of what has been emitted
  size_t pos = 0;
  while (pos < sentence.size()) {
    size_t len = 0;
    const int32_t t = trie.first_byte[static_cast<unsigned char>(sentence[pos])]
                          ? trie.longest_at(sentence, pos, len)
                          : -1;
    if (t < 0) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t stop = pos + len;
    pos = stop;  // matches never overlap, even when one is then left as text
    const AddedToken& token = tokens_[static_cast<size_t>(t)];
    if (token.special && !parse_special) continue;
    if (token.lstrip)
      start = std::max(trailing_space_start(sentence.substr(0, start)), start_offset);
    if (token.rstrip) stop += leading_space(sentence.substr(stop));
    if (start_offset < start)
      out.push_back({sentence.substr(start_offset, start - start_offset), -1});
    out.push_back({sentence.substr(start, stop - start), token.id});
    start_offset = stop;
  }
  if (start_offset < sentence.size()) out.push_back({sentence.substr(start_offset), -1});
}

void AddedVocabulary::split(std::string_view text, bool parse_special,
                            std::vector<Segment>& segments) const {
  segments.clear();
  std::vector<Segment> first;
  find(text, raw_, parse_special, first);
  for (const Segment& s : first) {
    if (s.id >= 0) {
      segments.push_back(s);
    } else {
      find(s.text, normalized_, parse_special, segments);
    }
  }
}

}  // namespace sparkglm
