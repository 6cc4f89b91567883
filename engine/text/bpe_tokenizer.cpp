#include "engine/text/bpe_tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <mutex>
#include <queue>
#include <shared_mutex>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "engine/text/utf8.h"

namespace sparkglm {

namespace {

using nlohmann::json;

// Ids index dense tables; a file claiming a larger id is malformed, not a reason to allocate.
constexpr int64_t kMaxTokenId = 1 << 24;
// Pieces are mostly short words; long ones (runs of spaces, base64) are rare enough to merge
// anew each time instead of filling the cache.
constexpr size_t kCacheEntries = 1 << 16;
constexpr size_t kCacheMaxPieceBytes = 64;

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others move to U+0100 and
// up in byte order, so that every byte is one visible character.
const std::array<char32_t, 256>& byte_chars() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (char32_t b = 0; b < 256; ++b) {
      const bool printable =
          (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      t[b] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

std::string byte_level_spelling(std::string_view bytes) {
  std::string s;
  for (char ch : bytes) append_utf8(s, byte_chars()[static_cast<unsigned char>(ch)]);
  return s;
}

// The bytes a token decodes to: as `tokenizers`' ByteLevel decoder, a token made only of
// byte-level characters maps back char by char, any other (an added token with a space or a CJK
// character) is its own UTF-8.
std::string byte_level_bytes(const std::string& token) {
  static const std::vector<int> byte_of = [] {
    std::vector<int> inv(324, -1);
    for (int b = 0; b < 256; ++b) inv[byte_chars()[static_cast<size_t>(b)]] = b;
    return inv;
  }();
  std::string out;
  for (size_t i = 0; i < token.size();) {
    size_t len;
    const char32_t cp = decode_utf8(token, i, len);
    if (cp >= byte_of.size() || byte_of[cp] < 0) return token;
    out += static_cast<char>(byte_of[cp]);
    i += len;
  }
  return out;
}

std::string shown(const json& value) {
  std::string s = value.dump();
  return s.size() > 120 ? s.substr(0, 120) + "..." : s;
}

[[noreturn]] void malformed(const std::string& field, const std::string& what) {
  throw Error(ErrorKind::kInvalidCheckpoint, field + ": " + what);
}

bool flag(const json& obj, const char* key, bool fallback, const std::string& where) {
  if (!obj.contains(key) || obj[key].is_null()) return fallback;
  if (!obj[key].is_boolean()) malformed(where + "." + key, "expected true or false");
  return obj[key].get<bool>();
}

int32_t token_id(const json& value, const std::string& field) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() >= kMaxTokenId)
    malformed(field, "expected a token id in [0, " + std::to_string(kMaxTokenId) + "), got " +
                         shown(value));
  return static_cast<int32_t>(value.get<int64_t>());
}

}  // namespace

struct BpeTokenizer::PieceCache {
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::shared_mutex mutex;
  std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> ids;
};

BpeTokenizer::BpeTokenizer() : cache_(std::make_unique<PieceCache>()) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

BpeTokenizer BpeTokenizer::load(const std::string& tokenizer_json_path) {
  const std::string where = "tokenizer.json '" + tokenizer_json_path + "'";
  return parse(
      read_json_text(tokenizer_json_path, ErrorKind::kInvalidCheckpoint, json_limits::kTokenizer),
      where);
}

BpeTokenizer BpeTokenizer::parse(const std::string& tokenizer_json, const std::string& where) {
  const json j =
      parse_json(tokenizer_json, where, ErrorKind::kInvalidCheckpoint, json_limits::kTokenizer);
  BpeTokenizer t;
  try {
    if (!j.is_object()) malformed("top level", "expected an object");
    if (j.contains("normalizer") && !j["normalizer"].is_null())
      throw Error(ErrorKind::kUnsupported,
                  "normalizer: only null is supported, got " + shown(j["normalizer"]));
    if (!j.contains("pre_tokenizer") || j["pre_tokenizer"].is_null())
      malformed("pre_tokenizer", "missing; expected ByteLevel or a Sequence ending in ByteLevel");
    t.pretokenizer_ = Pretokenizer::from_json(j["pre_tokenizer"]);
    // Compared as JSON values: a "type" of another JSON type is refused here, not thrown as a
    // type error by a typed read (the fuzzer found one).
    if (!j.contains("decoder") || !j["decoder"].is_object() || !j["decoder"].contains("type") ||
        j["decoder"]["type"] != "ByteLevel")
      throw Error(ErrorKind::kUnsupported,
                  "decoder: expected {\"type\": \"ByteLevel\"}, got " +
                      (j.contains("decoder") ? shown(j["decoder"]) : "nothing"));
    if (!j.contains("model")) malformed("model", "missing");
    t.load_model(j["model"]);
    t.load_added_tokens(j.contains("added_tokens") ? j["added_tokens"] : json::array());
  } catch (const Error& e) {
    throw Error(e.kind(), where + ": " + e.message());
  }
  return t;
}

void BpeTokenizer::load_model(const json& model) {
  if (!model.is_object()) malformed("model", "expected an object");
  if (!model.contains("type") || !model["type"].is_string())
    malformed("model.type", "missing; expected \"BPE\"");
  if (model["type"] != "BPE")
    throw Error(ErrorKind::kUnsupported,
                "model.type: " + shown(model["type"]) + " is not supported; expected \"BPE\"");
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0))
    throw Error(ErrorKind::kUnsupported, "model.dropout: only null is supported");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(affix) && !model[affix].is_null() && model[affix] != "")
      throw Error(ErrorKind::kUnsupported,
                  std::string("model.") + affix + ": only null is supported for byte-level BPE");

  if (!model.contains("vocab") || !model["vocab"].is_object())
    malformed("model.vocab", "missing; expected an object of token -> id");
  if (model["vocab"].empty())  // every id would decode to nothing and every text encode to nothing
    malformed("model.vocab", "is empty; expected an object of token -> id");
  for (const auto& [token, id_json] : model["vocab"].items()) {
    const int32_t id = token_id(id_json, "model.vocab[" + shown(json(token)) + "]");
    if (static_cast<size_t>(id) >= tokens_.size()) tokens_.resize(static_cast<size_t>(id) + 1);
    if (!tokens_[static_cast<size_t>(id)].empty())
      malformed("model.vocab", "id " + std::to_string(id) + " is given to both " +
                                   shown(json(tokens_[static_cast<size_t>(id)])) + " and " +
                                   shown(json(token)));
    tokens_[static_cast<size_t>(id)] = token;
    vocab_.emplace(token, id);
  }

  if (!model.contains("merges") || !model["merges"].is_array())
    malformed("model.merges", "missing; expected an array of \"left right\" or [left, right]");
  const json& merges = model["merges"];
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string field = "model.merges[" + std::to_string(rank) + "]";
    const json& m = merges[rank];
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        malformed(field, "expected two tokens separated by one space, got " + shown(m));
      left = s.substr(0, space), right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>(), right = m[1].get<std::string>();
    } else {
      malformed(field, "expected \"left right\" or [left, right], got " + shown(m));
    }
    const auto l = vocab_.find(left), r = vocab_.find(right), merged = vocab_.find(left + right);
    if (l == vocab_.end()) malformed(field, shown(json(left)) + " is not in model.vocab");
    if (r == vocab_.end()) malformed(field, shown(json(right)) + " is not in model.vocab");
    if (merged == vocab_.end())
      malformed(field, "the merged token " + shown(json(left + right)) + " is not in model.vocab");
    // A repeated pair keeps its last rank, as `tokenizers` builds its merge map.
    const uint64_t key = (uint64_t(uint32_t(l->second)) << 32) | uint32_t(r->second);
    merges_[key] = Merge{static_cast<int32_t>(rank), merged->second};
  }

  int32_t unk = -1;
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    if (!model["unk_token"].is_string()) malformed("model.unk_token", "expected a string or null");
    const auto it = vocab_.find(model["unk_token"].get<std::string>());
    if (it == vocab_.end()) malformed("model.unk_token", "is not in model.vocab");
    unk = it->second;
  }
  fuse_unk_ = flag(model, "fuse_unk", false, "model");
  ignore_merges_ = flag(model, "ignore_merges", false, "model");
  const bool byte_fallback = flag(model, "byte_fallback", false, "model");
  for (size_t b = 0; b < 256; ++b) {
    std::string ch;
    append_utf8(ch, byte_chars()[b]);
    if (const auto it = vocab_.find(ch); it != vocab_.end()) {
      byte_symbols_[b] = {it->second};
      continue;
    }
    if (byte_fallback) {  // tokenizers spells the fallback of a character's UTF-8 as <0xXX>
      std::vector<int32_t> ids;
      for (char c : ch) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", static_cast<unsigned char>(c));
        if (const auto it = vocab_.find(name); it != vocab_.end()) ids.push_back(it->second);
      }
      if (ids.size() == ch.size()) {
        byte_symbols_[b] = ids;
        continue;
      }
    }
    if (unk >= 0) byte_symbols_[b] = {unk}, byte_is_unk_[b] = true;
  }
}

void BpeTokenizer::load_added_tokens(const json& added_tokens) {
  if (!added_tokens.is_array()) malformed("added_tokens", "expected an array");
  std::vector<AddedToken> tokens;
  for (size_t i = 0; i < added_tokens.size(); ++i) {
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    const json& a = added_tokens[i];
    if (!a.is_object()) malformed(field, "expected an object");
    if (!a.contains("id")) malformed(field + ".id", "missing");
    if (!a.contains("content") || !a["content"].is_string() || a["content"] == "")
      malformed(field + ".content", "missing; expected a non-empty string");
    AddedToken t;
    t.id = token_id(a["id"], field + ".id");
    t.content = a["content"].get<std::string>();
    t.special = flag(a, "special", false, field);
    t.lstrip = flag(a, "lstrip", false, field);
    t.rstrip = flag(a, "rstrip", false, field);
    t.normalized = flag(a, "normalized", !t.special, field);
    if (flag(a, "single_word", false, field))
      throw Error(ErrorKind::kUnsupported, field + ".single_word: only false is supported");
    const auto id = static_cast<size_t>(t.id);
    if (id >= tokens_.size()) tokens_.resize(id + 1);
    tokens_[id] = t.content;  // an added token takes precedence over a vocabulary entry
    added_ids_[t.content] = t.id;
    tokens.push_back(std::move(t));
  }
  special_.assign(tokens_.size(), 0);
  for (const AddedToken& t : tokens) {
    if (!t.special || special_[static_cast<size_t>(t.id)]) continue;
    special_[static_cast<size_t>(t.id)] = 1;
    special_ids_.push_back(t.id);
  }
  std::sort(special_ids_.begin(), special_ids_.end());
  added_ = AddedVocabulary(std::move(tokens));
  token_bytes_.resize(tokens_.size());
  for (size_t id = 0; id < tokens_.size(); ++id) token_bytes_[id] = byte_level_bytes(tokens_[id]);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> ids;
  std::vector<AddedVocabulary::Segment> segments;
  std::vector<std::string> pieces;
  added_.split(text, parse_special, segments);
  for (const auto& segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      continue;
    }
    pretokenizer_.split(segment.text, pieces);
    for (const std::string& piece : pieces) encode_piece(piece, ids);
  }
  return ids;
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& ids) const {
  const auto first = static_cast<unsigned char>(piece[0]);
  if (piece.size() == 1 && byte_symbols_[first].size() == 1) {
    ids.push_back(byte_symbols_[first][0]);
    return;
  }
  const bool cacheable = piece.size() <= kCacheMaxPieceBytes;
  if (cacheable) {
    std::shared_lock lock(cache_->mutex);
    if (const auto it = cache_->ids.find(piece); it != cache_->ids.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> symbols;
  const auto whole = ignore_merges_ ? vocab_.find(byte_level_spelling(piece)) : vocab_.end();
  if (whole != vocab_.end()) {
    symbols.push_back(whole->second);
  } else {
    symbols.reserve(piece.size());
    bool after_unk = false;
    for (char ch : piece) {
      const auto b = static_cast<unsigned char>(ch);
      if (byte_is_unk_[b] && after_unk && fuse_unk_) continue;
      after_unk = byte_is_unk_[b];
      symbols.insert(symbols.end(), byte_symbols_[b].begin(), byte_symbols_[b].end());
    }
    merge(symbols);
  }
  ids.insert(ids.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    std::unique_lock lock(cache_->mutex);
    if (cache_->ids.size() >= kCacheEntries) cache_->ids.clear();
    cache_->ids.emplace(piece, std::move(symbols));
  }
}

void BpeTokenizer::merge(std::vector<int32_t>& symbols) const {
  if (symbols.size() < 2) return;
  // A doubly linked list over the symbols; a merge keeps the left one and unlinks the right.
  const auto n = static_cast<int32_t>(symbols.size());
  std::vector<int32_t> prev(symbols.size()), next(symbols.size());
  for (int32_t i = 0; i < n; ++i) prev[size_t(i)] = i - 1, next[size_t(i)] = i + 1 < n ? i + 1 : -1;
  struct Candidate {
    int32_t rank, left, right, left_id, right_id, merged;
    // Lowest rank first, then leftmost, as `tokenizers` orders its queue.
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto consider = [&](int32_t left, int32_t right) {
    const int32_t l = symbols[size_t(left)], r = symbols[size_t(right)];
    const auto it = merges_.find((uint64_t(uint32_t(l)) << 32) | uint32_t(r));
    if (it != merges_.end()) queue.push({it->second.rank, left, right, l, r, it->second.id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    // Skip a candidate that an earlier merge made stale.
    if (symbols[size_t(c.left)] != c.left_id || next[size_t(c.left)] != c.right ||
        symbols[size_t(c.right)] != c.right_id)
      continue;
    symbols[size_t(c.left)] = c.merged;
    symbols[size_t(c.right)] = -1;
    const int32_t after = next[size_t(c.right)];
    next[size_t(c.left)] = after;
    if (after >= 0) prev[size_t(after)] = c.left;
    if (prev[size_t(c.left)] >= 0) consider(prev[size_t(c.left)], c.left);
    if (after >= 0) consider(c.left, after);
  }
  std::erase(symbols, -1);
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size() || tokens_[size_t(id)].empty()) continue;
    if (skip_special && special_[size_t(id)]) continue;
    out += token_bytes_[size_t(id)];
  }
  return out;
}

std::optional<int32_t> BpeTokenizer::token_to_id(std::string_view token) const {
  const std::string key(token);
  if (const auto it = added_ids_.find(key); it != added_ids_.end()) return it->second;
  if (const auto it = vocab_.find(key); it != vocab_.end()) return it->second;
  return std::nullopt;
}

std::optional<std::string> BpeTokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= vocab_size() || tokens_[size_t(id)].empty()) return std::nullopt;
  return tokens_[size_t(id)];
}

}  // namespace sparkglm
