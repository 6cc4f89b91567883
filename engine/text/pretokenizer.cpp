#include "engine/text/pretokenizer.h"

#include <array>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/text/unicode_tables.h"
#include "engine/text/utf8.h"

namespace sparkglm {

namespace {

constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kCl100kRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kCl100kSingleDigitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// What the patterns ask of one character. "Other" is none of letter, number, white space.
enum CharFlag : uint8_t { kLetter = 1, kNumber = 2, kSpace = 4, kNewline = 8 };

// A decoded segment: code point, flags and byte offset of each character; offset[n] = size.
struct Chars {
  std::vector<char32_t> cp;
  std::vector<uint8_t> flags;
  std::vector<uint32_t> offset;
  size_t size() const { return cp.size(); }
  bool letter(size_t i) const { return i < size() && (flags[i] & kLetter); }
  bool number(size_t i) const { return i < size() && (flags[i] & kNumber); }
  bool space(size_t i) const { return i < size() && (flags[i] & kSpace); }
  bool newline(size_t i) const { return i < size() && (flags[i] & kNewline); }
  bool other(size_t i) const { return i < size() && !(flags[i] & (kLetter | kNumber | kSpace)); }
};

uint8_t flags_of(char32_t cp) {
  if (cp == kInvalidUtf8Byte) return 0;
  uint8_t f = 0;
  const UnicodeCategory c = unicode_category(cp);
  if (c == UnicodeCategory::kLetter) f |= kLetter;
  if (c == UnicodeCategory::kNumber) f |= kNumber;
  if (is_unicode_white_space(cp)) f |= kSpace;
  if (cp == '\r' || cp == '\n') f |= kNewline;
  return f;
}

const std::array<uint8_t, 128>& ascii_flags() {
  static const std::array<uint8_t, 128> table = [] {
    std::array<uint8_t, 128> t{};
    for (char32_t c = 0; c < 128; ++c) t[c] = flags_of(c);
    return t;
  }();
  return table;
}

void decode_chars(std::string_view s, Chars& c) {
  const auto& ascii = ascii_flags();
  c.cp.clear(), c.flags.clear(), c.offset.clear();
  for (size_t i = 0; i < s.size();) {
    size_t len;
    const char32_t cp = decode_utf8(s, i, len);
    c.cp.push_back(cp);
    c.flags.push_back(cp < 128 ? ascii[cp] : flags_of(cp));
    c.offset.push_back(static_cast<uint32_t>(i));
    i += len;
  }
  c.offset.push_back(static_cast<uint32_t>(s.size()));
}

size_t letter_run(const Chars& c, size_t i) {
  while (c.letter(i)) ++i;
  return i;
}

// The shared tail of every pattern: \s+(?!\S)|\s+ at a white-space character. The lookahead
// gives back the last space before a non-space, so that " word" keeps its space.
size_t match_space_run(const Chars& c, size_t i) {
  size_t end = i;
  while (c.space(end)) ++end;
  if (end == c.size() || end - i == 1) return end;
  return end - 1;
}

// (?i:...) folds case as Unicode does: besides ASCII, U+017F LONG S folds to 's'.
char32_t fold(char32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + ('a' - 'A');
  if (cp == 0x17F) return 's';
  return cp;
}

// Length of a contraction ('s 't 're 've 'm 'll 'd) at c[i], or 0.
size_t contraction(const Chars& c, size_t i, bool ignore_case) {
  if (c.cp[i] != '\'' || i + 1 >= c.size()) return 0;
  const auto at = [&](size_t k) { return ignore_case ? fold(c.cp[k]) : c.cp[k]; };
  const char32_t a = at(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= c.size()) return 0;
  const char32_t b = at(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// End of the GPT-2 match starting at c[i]; the alternatives are tried in the regex's order.
size_t match_gpt2(const Chars& c, size_t i) {
  if (const size_t n = contraction(c, i, /*ignore_case=*/false)) return i + n;
  const size_t j = c.cp[i] == ' ' ? i + 1 : i;  // the optional leading space of " ?X+"
  if (c.letter(j)) return letter_run(c, j);
  if (c.number(j)) {
    size_t k = j;
    while (c.number(k)) ++k;
    return k;
  }
  if (c.other(j)) {
    size_t k = j;
    while (c.other(k)) ++k;
    return k;
  }
  return match_space_run(c, i);  // c[i] is white space here
}

// End of the cl100k match starting at c[i]; max_digits is 3, or 1 for the single-digit form.
size_t match_cl100k(const Chars& c, size_t i, size_t max_digits) {
  if (const size_t n = contraction(c, i, /*ignore_case=*/true)) return i + n;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c.letter(i)) return letter_run(c, i);
  if (!c.newline(i) && !c.number(i) && c.letter(i + 1)) return letter_run(c, i + 1);
  // \p{N}{1,3}
  if (c.number(i)) {
    size_t k = i;
    while (c.number(k) && k - i < max_digits) ++k;
    return k;
  }
  // ?[^\s\p{L}\p{N}]+[\r\n]*
  const size_t j = c.cp[i] == ' ' && c.other(i + 1) ? i + 1 : i;
  if (c.other(j)) {
    size_t k = j;
    while (c.other(k)) ++k;
    while (c.newline(k)) ++k;
    return k;
  }
  // \s*[\r\n]+ : the white-space run up to and including its last line break.
  size_t end = i;
  size_t after_newline = 0;
  while (c.space(end)) {
    if (c.newline(end)) after_newline = end + 1;
    ++end;
  }
  if (after_newline > 0) return after_newline;
  return match_space_run(c, i);
}

}  // namespace

std::string_view split_pattern_regex(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::kGpt2:
      return kGpt2Regex;
    case SplitPattern::kCl100k:
      return kCl100kRegex;
    case SplitPattern::kCl100kSingleDigit:
      return kCl100kSingleDigitRegex;
  }
  return {};
}

SplitPattern split_pattern_from_regex(std::string_view regex) {
  for (SplitPattern p :
       {SplitPattern::kGpt2, SplitPattern::kCl100k, SplitPattern::kCl100kSingleDigit})
    if (regex == split_pattern_regex(p)) return p;
  throw Error(ErrorKind::kUnsupported,
              "pre_tokenizer Split pattern " + nlohmann::json(std::string(regex)).dump() +
                  " is not one this build implements (GPT-2, cl100k/GLM-4, cl100k single-digit)");
}

void split_by_pattern(SplitPattern pattern, std::string_view text,
                      std::vector<std::string_view>& pieces) {
  thread_local Chars c;
  decode_chars(text, c);
  for (size_t i = 0; i < c.size();) {
    size_t end = 0;
    switch (pattern) {
      case SplitPattern::kGpt2:
        end = match_gpt2(c, i);
        break;
      case SplitPattern::kCl100k:
        end = match_cl100k(c, i, 3);
        break;
      case SplitPattern::kCl100kSingleDigit:
        end = match_cl100k(c, i, 1);
        break;
    }
    SPARKGLM_ASSERT(end > i && end <= c.size(), "a split pattern matched nothing");
    pieces.push_back(text.substr(c.offset[i], c.offset[end] - c.offset[i]));
    i = end;
  }
}

namespace {

std::string describe(const nlohmann::json& node) {
  std::string s = node.dump();
  return s.size() > 200 ? s.substr(0, 200) + "..." : s;
}

bool bool_or(const nlohmann::json& node, const char* key, bool fallback, const std::string& where) {
  if (!node.contains(key) || node[key].is_null()) return fallback;
  if (!node[key].is_boolean())
    throw Error(ErrorKind::kInvalidCheckpoint, where + "." + key + ": expected true or false");
  return node[key].get<bool>();
}

}  // namespace

Pretokenizer Pretokenizer::byte_level(bool add_prefix_space, bool use_regex) {
  Pretokenizer p;
  p.stages_.push_back({true, SplitPattern::kGpt2, add_prefix_space, use_regex});
  return p;
}

Pretokenizer Pretokenizer::from_json(const nlohmann::json& node) {
  const std::string kWhere = "pre_tokenizer";
  if (!node.is_object() || !node.contains("type") || !node["type"].is_string())
    throw Error(ErrorKind::kInvalidCheckpoint,
                kWhere + ": expected an object with a \"type\" (ByteLevel or Sequence), got " +
                    describe(node));
  std::vector<const nlohmann::json*> stages;
  if (node["type"] == "Sequence") {
    if (!node.contains("pretokenizers") || !node["pretokenizers"].is_array())
      throw Error(ErrorKind::kInvalidCheckpoint, kWhere + ".pretokenizers: expected an array");
    for (const auto& s : node["pretokenizers"]) stages.push_back(&s);
  } else {
    stages.push_back(&node);
  }
  Pretokenizer p;
  for (size_t k = 0; k < stages.size(); ++k) {
    const nlohmann::json& s = *stages[k];
    const std::string where =
        &s == &node ? kWhere : kWhere + ".pretokenizers[" + std::to_string(k) + "]";
    const std::string type = s.is_object() && s.contains("type") && s["type"].is_string()
                                 ? s["type"].get<std::string>()
                                 : "";
    if (type == "ByteLevel") {
      // tokenizers' defaults for fields a file leaves out.
      p.stages_.push_back({true, SplitPattern::kGpt2, bool_or(s, "add_prefix_space", true, where),
                           bool_or(s, "use_regex", true, where)});
    } else if (type == "Split") {
      if (!s.contains("pattern") || !s["pattern"].is_object())
        throw Error(ErrorKind::kInvalidCheckpoint, where + ".pattern: expected an object");
      const auto& pat = s["pattern"];
      if (!pat.contains("Regex") || !pat["Regex"].is_string())
        throw Error(ErrorKind::kUnsupported,
                    where + ".pattern: only {\"Regex\": ...} is supported, got " + describe(pat));
      const std::string behavior = s.contains("behavior") && s["behavior"].is_string()
                                       ? s["behavior"].get<std::string>()
                                       : "";
      if (behavior != "Isolated")
        throw Error(ErrorKind::kUnsupported,
                    where + ".behavior: only \"Isolated\" is supported, got " +
                        (s.contains("behavior") ? describe(s["behavior"]) : "nothing"));
      if (bool_or(s, "invert", false, where))
        throw Error(ErrorKind::kUnsupported, where + ".invert: only false is supported");
      p.stages_.push_back(
          {false, split_pattern_from_regex(pat["Regex"].get<std::string>()), false, false});
    } else {
      throw Error(ErrorKind::kUnsupported,
                  where + ".type: expected ByteLevel, Split or Sequence, got " + describe(s));
    }
  }
  if (p.stages_.empty() || !p.stages_.back().byte_level)
    throw Error(ErrorKind::kUnsupported,
                kWhere + ": a byte-level BPE tokenizer needs a ByteLevel pre-tokenizer last");
  for (size_t k = 0; k + 1 < p.stages_.size(); ++k)
    if (p.stages_[k].byte_level)
      throw Error(ErrorKind::kUnsupported, kWhere + ": ByteLevel must appear once, last");
  return p;
}

void Pretokenizer::split(std::string_view segment, std::vector<std::string>& pieces) const {
  pieces.clear();
  if (!segment.empty()) pieces.emplace_back(segment);
  std::vector<std::string> next;
  std::vector<std::string_view> views;
  for (const Stage& stage : stages_) {
    next.clear();
    for (std::string& piece : pieces) {
      // tokenizers prefixes every piece the stage sees, not only the first of the text.
      if (stage.byte_level && stage.add_prefix_space && piece[0] != ' ') piece.insert(0, 1, ' ');
      if (stage.byte_level && !stage.use_regex) {
        next.push_back(std::move(piece));
        continue;
      }
      views.clear();
      split_by_pattern(stage.byte_level ? SplitPattern::kGpt2 : stage.pattern, piece, views);
      for (std::string_view v : views) next.emplace_back(v);
    }
    pieces.swap(next);
  }
}

}  // namespace sparkglm
