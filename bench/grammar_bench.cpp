// Structured-output mask cost (issue 20): compiles schemas against a vocabulary, then generates
// with random allowed tokens (seeded) and times every fill_mask and accept_token. Prints one JSON
// line per (vocabulary, schema): compile ms, mask us per token (mean, p50, p99, max; the first
// walk pays the per-frame cache misses, the second runs warm), accept us per token, the grammar's
// bytes (nodes + mask cache), the vocabulary trie's bytes and the process's peak RSS. It asserts
// nothing. Usage: grammar_bench [--vocab 154880] [--tokens 3000]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/peak_rss.h"
#include "engine/text/grammar/compiled_grammar.h"
#include "engine/text/grammar/grammar_matcher.h"

namespace {

using namespace sparkglm;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

// A BPE-sized vocabulary with a BPE's mix: every byte, words with and without a leading space,
// punctuation and JSON pieces, digit groups and 3-byte CJK characters.
TokenVocabulary synthetic_bpe(int32_t size) {
  std::mt19937 rng(20);
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.push_back(std::string(1, char(b)));
  const std::string letters = "etaoinshrdlcumwfgypbvkjxqz", punct = "{}[]\":,.-_ \n\\/'()";
  while (int32_t(t.size()) < size - 2) {
    std::string s;
    const unsigned kind = rng() % 20;
    if (kind < 13) {
      if (rng() % 2) s += ' ';
      for (int k = 2 + int(rng() % 8); k > 0; --k) s += letters[rng() % letters.size()];
    } else if (kind < 15) {
      for (int k = 2 + int(rng() % 3); k > 0; --k) s += punct[rng() % punct.size()];
    } else if (kind < 16) {
      for (int k = 1 + int(rng() % 3); k > 0; --k) s += char('0' + rng() % 10);
    } else {
      for (int k = 1 + int(rng() % 3); k > 0; --k) {
        const uint32_t cp = 0x4E00 + rng() % 0x5000;
        s += char(0xE0 | (cp >> 12));
        s += char(0x80 | ((cp >> 6) & 0x3F));
        s += char(0x80 | (cp & 0x3F));
      }
    }
    t.push_back(s);
  }
  const int32_t eos = int32_t(t.size());
  return TokenVocabulary(size, std::move(t), {eos});
}

json ninety_six_keys() {
  json props = json::object(), req = json::array();
  for (int i = 0; i < 96; ++i) {
    const std::string k = "field_" + std::to_string(i);
    props[k] = i % 4 == 0   ? json{{"type", "integer"}, {"minimum", 0}, {"maximum", 100000}}
               : i % 4 == 1 ? json{{"type", "string"}}
               : i % 4 == 2 ? json{{"type", "number"}}
                            : json{{"enum", {"alpha", "beta", "gamma"}}};
    req.push_back(k);
  }
  return {{"type", "object"},
          {"properties", props},
          {"required", req},
          {"additionalProperties", false}};
}

struct WalkTimes {
  std::vector<double> mask_us, accept_us;
  int tokens = 0;
  bool complete = false;
};

WalkTimes walk(const std::shared_ptr<const CompiledGrammar>& g, uint32_t seed, int max_tokens) {
  GrammarMatcher m(g);
  const TokenVocabulary& v = g->vocabulary();
  std::mt19937 rng(seed);
  std::vector<uint32_t> mask(size_t(g->mask_words()));
  std::vector<int32_t> allowed;
  WalkTimes w;
  for (; w.tokens < max_tokens; ++w.tokens) {
    auto t0 = Clock::now();
    m.fill_mask(mask.data());
    w.mask_us.push_back(us_since(t0));
    allowed.clear();
    for (int32_t i = 0; i < int32_t(mask.size()); ++i)
      for (uint32_t x = mask[size_t(i)]; x; x &= x - 1)
        allowed.push_back(i * 32 + __builtin_ctz(x));
    if (allowed.empty()) break;
    int32_t pick = allowed[rng() % allowed.size()];
    if (m.is_complete()) pick = v.eos_ids()[0];
    // Strings end soon: a token ending in a quote when one is allowed, a third of the time.
    if (rng() % 3 == 0)
      for (size_t k = 0, n = allowed.size(); k < 64; ++k) {
        const int32_t c = allowed[rng() % n];
        if (!v.bytes(c).empty() && v.bytes(c).back() == '"') {
          pick = c;
          break;
        }
      }
    t0 = Clock::now();
    m.accept_token(pick);
    w.accept_us.push_back(us_since(t0));
    if (m.is_terminated()) {
      w.complete = true;
      break;
    }
  }
  return w;
}

std::string stats(std::vector<double> x) {
  if (x.empty()) return "{}";
  std::sort(x.begin(), x.end());
  double sum = 0;
  for (double v : x) sum += v;
  char buf[160];
  std::snprintf(buf, sizeof buf, "{\"mean\":%.1f,\"p50\":%.1f,\"p99\":%.1f,\"max\":%.1f}",
                sum / double(x.size()), x[x.size() / 2], x[x.size() * 99 / 100], x.back());
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  int32_t vocab_size = 154880;
  int tokens = 3000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--vocab")) vocab_size = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--tokens")) tokens = std::atoi(argv[i + 1]);
  }
  std::vector<std::pair<std::string, TokenVocabulary>> vocabs;
  vocabs.emplace_back("byte320", TokenVocabulary::for_byte_tokenizer(320, {256}));
  auto t0 = Clock::now();
  vocabs.emplace_back("bpe" + std::to_string(vocab_size), synthetic_bpe(vocab_size));
  std::printf("{\"vocabulary\":\"%s\",\"build_ms\":%.1f,\"trie_bytes\":%zu}\n",
              vocabs.back().first.c_str(), us_since(t0) / 1000,
              vocabs.back().second.memory_bytes());
  std::vector<std::pair<std::string, OutputConstraint>> schemas;
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kJsonSchema;
  c.schema = ninety_six_keys();
  schemas.emplace_back("96_required_keys", c);
  c.kind = OutputConstraint::Kind::kJsonObject;
  schemas.emplace_back("json_object", c);
  for (const auto& [vname, vocab] : vocabs)
    for (const auto& [sname, constraint] : schemas) {
      t0 = Clock::now();
      auto g = compile_output_constraint(constraint, vocab);
      const double compile_ms = us_since(t0) / 1000;
      const WalkTimes cold = walk(g, 1, tokens), warm = walk(g, 1, tokens);
      // The same schema again, as the next request compiles it: string and number frames are
      // already in the vocabulary's shared cache.
      const WalkTimes next = walk(compile_output_constraint(constraint, vocab), 2, tokens);
      const auto cache = g->cache_stats();
      std::printf(
          "{\"vocabulary\":\"%s\",\"schema\":\"%s\",\"compile_ms\":%.2f,\"tokens\":%d,"
          "\"complete\":%s,\"mask_us_cold\":%s,\"mask_us_warm\":%s,\"mask_us_next_request\":%s,"
          "\"accept_us\":%s,"
          "\"grammar_bytes\":%zu,\"cache_entries\":%zu,\"cache_clears\":%llu,"
          "\"peak_rss_kib\":%ld}\n",
          vname.c_str(), sname.c_str(), compile_ms, warm.tokens, warm.complete ? "true" : "false",
          stats(cold.mask_us).c_str(), stats(warm.mask_us).c_str(), stats(next.mask_us).c_str(),
          stats(warm.accept_us).c_str(), g->memory_bytes(), cache.entries,
          (unsigned long long)cache.clears, long(bench::peak_rss_bytes() / 1024));
      std::fflush(stdout);
    }
  return 0;
}
