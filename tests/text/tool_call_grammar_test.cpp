// A forced tool call (tool_choice required/named) constrained by the grammar: random allowed
// tokens always end on GLM markup that ToolCallParser reads back as calls of the given tools, with
// arguments valid under each tool's parameters schema, and nothing else as content.
#include <gtest/gtest.h>

#include <random>

#include "engine/core/error.h"
#include "engine/text/byte_tokenizer.h"
#include "engine/text/grammar/compiled_grammar.h"
#include "engine/text/grammar/grammar_matcher.h"
#include "engine/text/tool_parser.h"
#include "tests/text/json_schema_check.h"

namespace sparkglm {
namespace {

using json = nlohmann::json;
constexpr int32_t kEos = ByteTokenizer::kEndOfText;

const std::vector<json> kTools = {
    json::parse(R"({"type":"function","function":{"name":"get_weather","parameters":{
      "type":"object","properties":{"city":{"type":"string","maxLength":6},
      "days":{"type":"integer","minimum":1,"maximum":7},"units":{"type":"string","enum":["c","f"]},
      "hourly":{"type":"boolean"}},"required":["city","days"]}}})"),
    json::parse(R"({"type":"function","function":{"name":"ping","parameters":{"type":"object",
      "properties":{}}}})")};

// Random allowed tokens until eos; the text as the byte tokenizer decodes it (tags as text).
std::string walk(const std::shared_ptr<const CompiledGrammar>& g, uint32_t seed) {
  GrammarMatcher m(g);
  std::mt19937 rng(seed);
  std::vector<uint32_t> mask(size_t(g->mask_words()));
  std::vector<int32_t> ids;
  for (int step = 0; step < 5000; ++step) {
    m.fill_mask(mask.data());
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < g->vocab_size(); ++id) {
      const bool on = mask[size_t(id) >> 5] >> (id & 31) & 1;
      GrammarMatcher probe = m;
      EXPECT_EQ(on, probe.accept_token(id)) << "token " << id << " at step " << step;
      if (on) allowed.push_back(id);
    }
    if (allowed.empty()) {
      ADD_FAILURE() << "no token allowed";
      break;
    }
    int32_t pick = allowed[rng() % allowed.size()];
    if (m.is_complete() && rng() % 2) pick = kEos;
    // Raw text ends soon: prefer a tag when one is allowed.
    for (int32_t id : allowed)
      if (id > 255 && id != kEos && rng() % 4 == 0) pick = id;
    EXPECT_TRUE(m.accept_token(pick));
    if (pick == kEos) break;
    ids.push_back(pick);
  }
  return ByteTokenizer().decode(ids);
}

TEST(ToolCallGrammar, RandomCallsParseAsCallsOfTheTools) {
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kToolCall;
  c.tools = kTools;
  auto g = compile_output_constraint(c, TokenVocabulary::for_byte_tokenizer(320, {kEos}));
  int calls = 0;
  for (uint32_t seed = 0; seed < 12; ++seed) {
    const std::string text = walk(g, seed);
    const ToolParseDelta d = ToolCallParser::parse(text, kTools);
    EXPECT_EQ(d.content, "") << text;
    ASSERT_FALSE(d.calls.empty()) << text;
    for (const ParsedToolCall& call : d.calls) {
      ++calls;
      const json& params = call.name == "ping" ? kTools[1]["function"]["parameters"]
                                               : kTools[0]["function"]["parameters"];
      const json args = json::parse(call.arguments.dump());
      EXPECT_EQ(testing::check_schema(args, params, params), "") << text;
    }
  }
  EXPECT_GT(calls, 12);
}

TEST(ToolCallGrammar, ANamedToolOnlyAndAVocabularyWithoutTagsIsRefused) {
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kToolCall;
  c.tools = {kTools[1]};
  auto g = compile_output_constraint(c, TokenVocabulary::for_byte_tokenizer(320, {kEos}));
  GrammarMatcher m(g);
  EXPECT_TRUE(m.accept_token(ByteTokenizer::kToolCall));
  EXPECT_FALSE(GrammarMatcher(m).accept_token('g'));  // get_weather is not offered
  EXPECT_TRUE(m.accept_bytes("ping"));
  EXPECT_TRUE(m.accept_token(ByteTokenizer::kEndToolCall));
  EXPECT_TRUE(m.is_complete());
  std::vector<std::string> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[size_t(b)] = std::string(1, char(b));
  try {
    compile_output_constraint(c, TokenVocabulary(300, bytes, {kEos}));
    ADD_FAILURE() << "compiled without tag tokens";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("<tool_call>"), std::string::npos);
  }
}

}  // namespace
}  // namespace sparkglm
