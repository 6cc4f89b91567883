#include "workloads/filler_text.h"

#include <array>
#include <cctype>

#include "harness/statistics.h"

namespace sparkglm::workloads {

namespace {

// Common short words: each is one token in GLM's vocabulary, so a unit costs about one token.
constexpr std::array<const char*, 64> kWords = {
    "the",    "river", "stone", "light",  "house",  "garden", "window", "morning",
    "road",   "small", "old",   "quiet",  "bright", "warm",   "long",   "green",
    "walked", "found", "kept",  "saw",    "made",   "held",   "left",   "turned",
    "and",    "with",  "near",  "over",   "under",  "after",  "before", "while",
    "a",      "of",    "in",    "to",     "her",    "his",    "their",  "our",
    "city",   "field", "table", "letter", "story",  "water",  "friend", "market",
    "bridge", "hill",  "night", "summer", "winter", "book",   "door",   "tree",
    "slowly", "again", "once",  "never",  "always", "there",  "every",  "other"};

uint64_t draw(uint64_t seed, uint64_t index) {
  harness::SplitMix64 g(mix_seed(seed, 0x5eed, index));
  return g.next();
}

// Does word i end a sentence? About one word in nine, never two in a row at the start.
bool ends_sentence(uint64_t seed, int64_t i) {
  return i > 0 && (draw(seed, uint64_t(i)) >> 40) % 9 == 0;
}

}  // namespace

uint64_t mix_seed(uint64_t seed, uint64_t tag, uint64_t index) {
  harness::SplitMix64 g(seed ^ (tag * 0x9E3779B97F4A7C15ull));
  uint64_t x = g.next();
  harness::SplitMix64 h(x ^ (index * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull));
  return h.next();
}

int64_t draw_between(uint64_t seed, uint64_t index, int64_t lo, int64_t hi) {
  harness::SplitMix64 g(mix_seed(seed, 0xd1a7, index));
  return lo + int64_t(g.below(uint64_t(hi - lo + 1)));
}

std::string prose_words(uint64_t seed, int64_t n) {
  std::string out;
  out.reserve(size_t(n) * 7);
  bool capital = true;
  for (int64_t i = 0; i < n; ++i) {
    std::string w = kWords[draw(seed, uint64_t(i)) % kWords.size()];
    if (capital) w[0] = char(std::toupper(static_cast<unsigned char>(w[0])));
    out += ' ';
    out += w;
    capital = ends_sentence(seed, i + 1);
    if (capital) out += '.';
  }
  return out;
}

std::string code_lines(uint64_t seed, int64_t n) {
  static constexpr std::array<const char*, 4> kOps = {" + ", " - ", " * ", " ^ "};
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t x = draw(seed, uint64_t(i));
    const int64_t src = i == 0 ? 0 : int64_t((x >> 8) % uint64_t(i));
    if ((x >> 4) % 7 == 0) {
      out += "  if (v" + std::to_string(src) + " > " + std::to_string((x >> 20) % 1000) + ") v" +
             std::to_string(src) + " /= 3;\n";
    } else {
      out += "  int v" + std::to_string(i) + " = v" + std::to_string(src) +
             kOps[(x >> 16) % kOps.size()] + std::to_string((x >> 24) % 97 + 2) + ";\n";
    }
  }
  return out;
}

std::string letter_tag(uint64_t seed, uint64_t index, int letters) {
  harness::SplitMix64 g(mix_seed(seed, 0x7a6, index));
  std::string out;
  for (int i = 0; i < letters; ++i) out += char('a' + g.below(26));
  return out;
}

}  // namespace sparkglm::workloads
