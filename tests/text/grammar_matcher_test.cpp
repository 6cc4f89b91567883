// The grammar matcher driven by random allowed tokens: every mask equals what accept_token
// accepts token by token, and every completed output parses and validates under its schema.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/text/grammar/compiled_grammar.h"
#include "engine/text/grammar/grammar_matcher.h"
#include "tests/text/json_schema_check.h"

namespace sparkglm {
namespace {

using json = nlohmann::json;
constexpr int32_t kEos = 256;

TokenVocabulary byte_vocab() {
  return TokenVocabulary::for_byte_tokenizer(320, {kEos});
}

// A BPE-like vocabulary: every byte, JSON's frequent pieces and random multi-byte strings.
TokenVocabulary piece_vocab() {
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.push_back(std::string(1, char(b)));
  for (const char* p :
       {"{\"",      "\":",   "\": ", "\",",   "\", \"", "\"}", "\"},", "},",       "}}",
        "]}",       "[{",    "true", "false", "null",   "12",  "-3",   "0.",       "e+",
        "\\n",      "\\u00", " \"",  "\n  ",  "  ",     "abc", "name", "\"name\"", "é",
        "\xe2\x82", "\xac",  ",\n",  "1,",    "0]",     "[]",  "{}",   "\"\""})
    t.push_back(p);
  std::mt19937 rng(7);
  const std::string alphabet = "abc\"{}[],:0123456789 .-e\\";
  for (int i = 0; i < 300; ++i) {
    std::string s;
    for (int k = 1 + int(rng() % 5); k > 0; --k) s += alphabet[rng() % alphabet.size()];
    t.push_back(s);
  }
  t.push_back("");  // an eos id past the pieces
  const int32_t eos = int32_t(t.size()) - 1;
  return TokenVocabulary(int32_t(t.size()) + 5, t, {eos});
}

OutputConstraint schema_constraint(const json& schema) {
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kJsonSchema;
  c.schema = schema;
  return c;
}

bool bit(const std::vector<uint32_t>& m, int32_t id) {
  return m[size_t(id) >> 5] >> (id & 31) & 1;
}

// Walks the grammar with random allowed tokens until eos; returns the text. With `check_all`,
// every step's mask is compared with accept_token over the whole vocabulary.
std::string random_walk(const std::shared_ptr<const CompiledGrammar>& g, uint32_t seed,
                        bool check_all, int max_tokens = 20000) {
  GrammarMatcher m(g);
  const TokenVocabulary& v = g->vocabulary();
  std::mt19937 rng(seed);
  std::vector<uint32_t> mask(size_t(g->mask_words()));
  std::string out;
  for (int step = 0; step < max_tokens; ++step) {
    m.fill_mask(mask.data());
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < v.vocab_size(); ++id) {
      if (bit(mask, id)) allowed.push_back(id);
      if (check_all) {
        GrammarMatcher probe = m;
        EXPECT_EQ(bit(mask, id), probe.accept_token(id))
            << "token " << id << " '" << v.bytes(id) << "' after '" << out << "'";
      }
    }
    if (allowed.empty()) {
      ADD_FAILURE() << "no token allowed after '" << out << "'";
      return out;
    }
    int32_t pick = allowed[rng() % allowed.size()];
    const bool eos_ok = m.is_complete();
    if (eos_ok && rng() % 2) {
      pick = v.eos_ids()[0];
    } else if (rng() % 2) {
      // Prefer tokens that close or separate, so strings and arrays end.
      for (int32_t id : allowed) {
        const std::string& b = v.bytes(id);
        if (!b.empty() && std::string("\"}],:").find(b.back()) != std::string::npos &&
            rng() % 3 == 0) {
          pick = id;
          break;
        }
      }
    }
    EXPECT_TRUE(m.accept_token(pick));
    if (v.is_eos(pick)) {
      EXPECT_TRUE(m.is_terminated());
      return out;
    }
    out += v.bytes(pick);
  }
  ADD_FAILURE() << "no eos within " << max_tokens << " tokens: " << out.substr(0, 200);
  return out;
}

void expect_valid_walks(const json& schema, int walks, bool check_all) {
  for (const TokenVocabulary& v : {byte_vocab(), piece_vocab()}) {
    auto g = compile_output_constraint(schema_constraint(schema), v);
    for (int w = 0; w < walks; ++w) {
      const std::string text = random_walk(g, uint32_t(1000 + w), check_all);
      json parsed;
      try {
        parsed = json::parse(text);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "not JSON: " << text << ": " << e.what();
        continue;
      }
      EXPECT_EQ(testing::check_schema(parsed, schema, schema), "") << text;
    }
  }
}

TEST(GrammarMatcher, FlatObjectMasksEqualAcceptanceAndOutputsValidate) {
  expect_valid_walks(json::parse(R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":6},"age":{"type":"integer","minimum":-5,"maximum":37},
      "ok":{"type":"boolean"},"x":{"type":"null"}},"required":["name","age"]})"),
                     6, true);
}

TEST(GrammarMatcher, NestedArraysEnumsAndNumbersValidate) {
  expect_valid_walks(json::parse(R"({"type":"object","properties":{
      "tags":{"type":"array","items":{"enum":["a","b",3,null,{"k":[1]}]},"minItems":1,"maxItems":3},
      "p":{"type":"number","minimum":0.5,"exclusiveMaximum":2},
      "inner":{"type":"object","properties":{"v":{"type":["integer","null"]},
               "s":{"type":"string","minLength":2}},"required":["s"]},
      "c":{"const":"fixed"}},"required":["tags","p","inner","c"],"additionalProperties":false})"),
                     6, true);
}

TEST(GrammarMatcher, AnyOfRefsAndFreeFormValuesValidate) {
  expect_valid_walks(json::parse(R"({"$defs":{"node":{"type":"object","properties":{
      "v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},
      "required":["v"]}},
      "anyOf":[{"$ref":"#/$defs/node"},{"type":"array","items":{}},{"type":"string"}]})"),
                     6, true);
}

TEST(GrammarMatcher, JsonObjectGivesAnObject) {
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kJsonObject;
  auto g = compile_output_constraint(c, piece_vocab());
  for (uint32_t seed = 0; seed < 5; ++seed) {
    const std::string text = random_walk(g, seed, seed == 0);
    EXPECT_TRUE(json::parse(text).is_object()) << text;
  }
}

TEST(GrammarMatcher, NinetySixRequiredKeysComplete) {
  json props = json::object(), req = json::array();
  for (int i = 0; i < 96; ++i) {
    const std::string k = "field_" + std::to_string(i);
    props[k] = i % 3 == 0   ? json{{"type", "integer"}, {"minimum", 0}, {"maximum", 999}}
               : i % 3 == 1 ? json{{"type", "string"}, {"maxLength", 8}}
                            : json{{"type", "boolean"}};
    req.push_back(k);
  }
  const json schema = {{"type", "object"},
                       {"properties", props},
                       {"required", req},
                       {"additionalProperties", false}};
  auto g = compile_output_constraint(schema_constraint(schema), piece_vocab());
  const json parsed = json::parse(random_walk(g, 3, false));
  EXPECT_EQ(parsed.size(), 96u);
  EXPECT_EQ(testing::check_schema(parsed, schema, schema), "");
  EXPECT_LT(g->memory_bytes(), size_t(64) << 20);
}

TEST(GrammarMatcher, EosOnlyWhenCompleteAndRollbackRestores) {
  auto g = compile_output_constraint(schema_constraint({{"type", "integer"}}), byte_vocab());
  GrammarMatcher m(g);
  std::vector<uint32_t> mask(size_t(g->mask_words()));
  m.fill_mask(mask.data());
  EXPECT_FALSE(bit(mask, kEos));
  EXPECT_TRUE(bit(mask, ' '));  // leading whitespace, bounded
  EXPECT_FALSE(m.accept_token(kEos));
  ASSERT_TRUE(m.accept_token('4'));
  ASSERT_TRUE(m.accept_token('2'));
  m.fill_mask(mask.data());
  EXPECT_TRUE(bit(mask, kEos));
  EXPECT_FALSE(bit(mask, ' '));  // nothing follows the value
  m.rollback(2);
  EXPECT_FALSE(m.is_complete());
  EXPECT_FALSE(m.accept_token('0') && m.accept_token('1'));  // no leading zeros
  for (int i = 0; i < g->grammar().limits.max_whitespace; ++i) {
    GrammarMatcher w(g);
    for (int k = 0; k <= i; ++k) ASSERT_TRUE(w.accept_token(' '));
  }
  GrammarMatcher w(g);
  for (int k = 0; k < g->grammar().limits.max_whitespace; ++k) ASSERT_TRUE(w.accept_token(' '));
  EXPECT_FALSE(w.accept_token(' '));  // the whitespace bound
}

// Issue 20: tool_choice "required" came back as a 200 without a call when the model stopped inside
// its reasoning; the constrained value must come before any eos.
TEST(GrammarMatcher, AfterReasoningStartsAtEndThinkAndRefusesEosBefore) {
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kChoice;
  c.choices = {"yes", "no"};
  c.after_reasoning = true;
  auto g = compile_output_constraint(c, byte_vocab());
  GrammarMatcher m(g);
  std::vector<uint32_t> mask(size_t(g->mask_words()));
  m.fill_mask(mask.data());  // unconstrained while reasoning, but for eos
  for (int32_t id = 0; id < g->vocab_size(); ++id) EXPECT_EQ(bit(mask, id), id != kEos) << id;
  EXPECT_TRUE(m.accept_token('z'));
  EXPECT_TRUE(m.accept_token(267));  // </think>
  m.fill_mask(mask.data());
  EXPECT_TRUE(bit(mask, 'y'));
  EXPECT_TRUE(bit(mask, 'n'));
  EXPECT_FALSE(bit(mask, 'z'));
  EXPECT_FALSE(bit(mask, ' '));  // a choice is raw text: no whitespace
  EXPECT_TRUE(m.accept_token('n') && m.accept_token('o') && m.is_complete());
}

TEST(SchemaCompiler, RefusesUnsupportedKeywordsByPath) {
  auto refused = [](const json& schema) {
    try {
      compile_output_constraint(schema_constraint(schema), byte_vocab());
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refused(json::parse(R"({"type":"object","properties":{"n":{"type":"string",
      "pattern":"^a"}}})"))
                .find("$.properties.n.pattern"),
            std::string::npos);
  EXPECT_NE(refused({{"allOf", json::array()}}).find("'allOf'"), std::string::npos);
  EXPECT_NE(refused({{"$ref", "#/$defs/missing"}}).find("$defs"), std::string::npos);
  EXPECT_NE(refused(json::parse(R"({"oneOf":[{"type":"string"},{"enum":["a"]}]})")).find("anyOf"),
            std::string::npos);
  json deep = {{"type", "integer"}};
  for (int i = 0; i < 40; ++i) deep = {{"type", "array"}, {"items", deep}};
  EXPECT_NE(refused(deep).find("the limit"), std::string::npos);
  EXPECT_NE(refused({{"type", "integer"}, {"minimum", 3}, {"maximum", 2}}).find("no integer"),
            std::string::npos);
}

// Frame masks are walked from the top frame alone, but the automaton refuses to push a frame past
// max_stack_depth: near that depth the mask must still equal what accept_token accepts (a recursive
// schema the model nests deeper and deeper was a 500: "the output grammar refused token 91").
TEST(GrammarMatcher, MaskEqualsAcceptanceAtTheStackDepthLimit) {
  const json schema = json::parse(
      R"({"$ref":"#/$defs/a","$defs":{"a":{"type":"array","items":{"$ref":"#/$defs/a"}}}})");
  for (const TokenVocabulary& v : {byte_vocab(), piece_vocab()}) {
    auto g = compile_output_constraint(schema_constraint(schema), v);
    GrammarMatcher m(g);
    std::vector<uint32_t> mask(size_t(g->mask_words()));
    int depth = 0;
    for (; depth < 2 * g->grammar().limits.max_stack_depth; ++depth) {
      m.fill_mask(mask.data());
      for (int32_t id = 0; id < v.vocab_size(); ++id) {
        GrammarMatcher probe = m;
        ASSERT_EQ(bit(mask, id), probe.accept_token(id))
            << "token " << id << " '" << v.bytes(id) << "' at depth " << depth;
      }
      if (!m.accept_bytes("[")) break;
    }
    EXPECT_LT(depth, 2 * g->grammar().limits.max_stack_depth) << "nesting was never refused";
  }
}

// A schema that requires itself has no finite value: a 400 at compile time, not a matcher that
// nests until it allows no token (a 500).
TEST(SchemaCompiler, RefusesSchemasWithNoFiniteValue) {
  for (
      const char* schema :
      {R"({"$ref":"#/$defs/a","$defs":{"a":{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},
            "required":["x"]}}})",
       R"({"$ref":"#/$defs/a","$defs":{"a":{"type":"array","items":{"$ref":"#/$defs/a"},
            "minItems":1}}})",
       R"({"anyOf":[{"type":"null"},{"$ref":"#/$defs/a"}],"$defs":{"a":{"type":"array",
            "items":{"$ref":"#/$defs/a"},"minItems":2}}})"}) {
    std::string what = "accepted";
    try {
      compile_output_constraint(schema_constraint(json::parse(schema)), byte_vocab());
    } catch (const Error& e) {
      what = e.what();
    }
    EXPECT_NE(what.find("no finite value"), std::string::npos) << schema << ": " << what;
  }
  // Recursion that may stop is fine.
  EXPECT_NO_THROW(compile_output_constraint(
      schema_constraint(json::parse(R"({"$ref":"#/$defs/a","$defs":{"a":{"type":"object",
          "properties":{"x":{"$ref":"#/$defs/a"}}}}})")),
      byte_vocab()));
}

// A bounded number is written with at most 12 fraction digits and no exponent: bounds that admit
// no such value are a 400 at compile time, not a matcher left with no token to allow.
TEST(SchemaCompiler, RefusesNumberBoundsNoWrittenNumberMeets) {
  auto refused = [](const json& schema) {
    try {
      compile_output_constraint(schema_constraint(schema), byte_vocab());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  for (const char* schema :
       {R"({"type":"number","minimum":1e20})", R"({"type":"number","exclusiveMaximum":-1e15})",
        R"({"type":"number","minimum":1e-13,"maximum":9e-13})",
        R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1e-12})",
        R"({"type":"number","minimum":0.1234567890123,"maximum":0.1234567890124})"})
    EXPECT_NE(refused(json::parse(schema)).find("12 fraction digits"), std::string::npos)
        << schema << ": " << refused(json::parse(schema));
}

// Bounds between two written values: every digit the matcher allows can still be completed.
TEST(GrammarMatcher, NumberBoundsNarrowerThanTheLastDigitComplete) {
  for (const char* schema : {R"({"type":"number","exclusiveMinimum":0,"maximum":1e-12})",
                             R"({"type":"number","minimum":-2.5e-12,"maximum":-0.5e-12})",
                             R"({"type":"number","minimum":0.12345678901205,"maximum":0.1234568})",
                             R"({"type":"number","minimum":999999999999999.5})"})
    expect_valid_walks(json::parse(schema), 4, true);
}

}  // namespace
}  // namespace sparkglm
