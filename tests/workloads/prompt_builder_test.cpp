#include "workloads/prompt_builder.h"

#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "tests/workloads/token_counters.h"
#include "workloads/filler_text.h"

namespace sparkglm::workloads {
namespace {

using nlohmann::json;
using testing::byte_tokens;
using testing::raw_bytes;
using testing::word_count;
using testing::word_tokens;

CaseSpec make_case(const std::string& builder, Endpoint endpoint, int32_t tokens,
                   int32_t requests = 4) {
  CaseSpec c;
  c.id = "t";
  c.endpoint = endpoint;
  c.prompt.builder = builder;
  c.prompt.seed = 7;
  c.prompt.tokens = {tokens};
  c.requests = requests;
  c.salt = "salt-a";
  return c;
}

const json kNoThinking = {{"chat_template_kwargs", {{"enable_thinking", false}}}};

std::vector<std::string> texts(const std::vector<Prompt>& prompts) {
  std::vector<std::string> out;
  for (const Prompt& p : prompts) out.push_back(p.body_fields().dump());
  return out;
}

const std::vector<std::string> kSingleBuilders = {"prose",    "code",       "structured",
                                                  "counting", "arithmetic", "needle"};

TEST(PromptBuilder, DeterministicPerSeed) {
  for (const std::string& b : kSingleBuilders) {
    SCOPED_TRACE(b);
    const CaseSpec c = make_case(b, Endpoint::kChat, 600);
    EXPECT_EQ(texts(build_case_prompts(c, 0, kNoThinking, byte_tokens)),
              texts(build_case_prompts(c, 0, kNoThinking, byte_tokens)));
  }
  EXPECT_EQ(prose_words(3, 50), prose_words(3, 50));
  EXPECT_EQ(prose_words(3, 80).substr(0, prose_words(3, 50).size()), prose_words(3, 50));
  EXPECT_NE(prose_words(3, 50), prose_words(4, 50));
}

TEST(PromptBuilder, DistinctAcrossSeedsSaltsAndRequests) {
  for (const std::string& b : kSingleBuilders) {
    SCOPED_TRACE(b);
    const CaseSpec c = make_case(b, Endpoint::kCompletions, 600);
    CaseSpec other_seed = c;
    other_seed.prompt.seed = 8;
    CaseSpec other_salt = c;
    other_salt.salt = "salt-b";
    const auto a = build_case_prompts(c, 0, {}, byte_tokens);
    const auto s = build_case_prompts(other_seed, 0, {}, byte_tokens);
    const auto t = build_case_prompts(other_salt, 0, {}, byte_tokens);
    std::set<std::string> seen;
    for (const auto* set : {&a, &s, &t})
      for (const Prompt& p : *set) seen.insert(p.text());
    EXPECT_EQ(seen.size(), 12u) << "some prompts coincide";
    // Another seed changes the body, not just the marker.
    EXPECT_NE(a[0].text().substr(a[0].marker.size()), s[0].text().substr(s[0].marker.size()));
  }
}

TEST(PromptBuilder, MarkersAreUniquePerRequestAndLeadThePrompt) {
  CaseSpec c = make_case("prose", Endpoint::kCompletions, 200, 12);
  const auto prompts = build_case_prompts(c, 0, {}, byte_tokens);
  std::set<std::string> markers;
  for (const Prompt& p : prompts) {
    EXPECT_TRUE(is_marker_text(p.marker)) << p.marker;
    EXPECT_EQ(p.text().rfind(p.marker, 0), 0u);
    EXPECT_EQ(p.text().find("[[", 2), std::string::npos) << "a second marker-like text";
    markers.insert(p.marker);
  }
  EXPECT_EQ(markers.size(), prompts.size());
  EXPECT_EQ(prompts[3].marker, "[[sg:salt-a:3]]");
  // Without fresh_each_repetition a request repeats byte for byte across repetitions ...
  EXPECT_EQ(texts(build_case_prompts(c, 0, {}, byte_tokens)),
            texts(build_case_prompts(c, 2, {}, byte_tokens)));
  // ... with it, every repetition (and warmup) has its own markers.
  c.fresh_each_repetition = true;
  const auto r2 = build_case_prompts(c, 2, {}, byte_tokens);
  const auto w1 = build_case_prompts(c, -1, {}, byte_tokens);
  EXPECT_EQ(r2[3].marker, "[[sg:salt-a:r2:3]]");
  EXPECT_EQ(w1[3].marker, "[[sg:salt-a:w1:3]]");
  EXPECT_NE(r2[0].text(), w1[0].text());
  EXPECT_FALSE(is_marker_text("[[sg:Salt:1]]"));
  EXPECT_FALSE(is_marker_text("[[sg:a:1]"));
}

TEST(PromptBuilder, WarmReplayRepeatsItsOriginal) {
  CaseSpec c = make_case("prose", Endpoint::kCompletions, 300, 4);
  c.warm_replay = true;
  const auto p = build_case_prompts(c, 0, {}, byte_tokens);
  EXPECT_EQ(p[1].body_fields(), p[0].body_fields());
  EXPECT_EQ(p[1].marker, p[0].marker);
  EXPECT_EQ(p[3].body_fields(), p[2].body_fields());
  EXPECT_NE(p[2].body_fields(), p[0].body_fields());
}

TEST(Calibration, ExactWithByteAndWordCounters) {
  for (const std::string& b : kSingleBuilders) {
    for (int32_t target : {400, 401, 1000, 4099}) {
      SCOPED_TRACE(b + " " + std::to_string(target));
      const CaseSpec c = make_case(b, Endpoint::kCompletions, target, 1);
      Prompt bytes = build_case_prompts(c, 0, {}, byte_tokens)[0];
      calibrate(bytes, target, raw_bytes);
      EXPECT_EQ(raw_bytes(bytes.text()), target);
      EXPECT_EQ(bytes.tokens, target);
      Prompt words = bytes;
      calibrate(words, target / 4, word_count);
      EXPECT_EQ(word_count(words.text()), target / 4);
      Prompt body = bytes;
      calibrate(body, target / 4, json::object(), word_tokens);
      EXPECT_EQ(word_tokens(body.body_fields()), target / 4);
      // Lumpy: a word of n letters is ceil(n / 3) tokens, so units cost 1 to 4 tokens.
      const TextTokenCounter lumpy = [](const std::string& s) {
        int32_t n = 0, run = 0;
        for (char ch : s + " ") {
          if (ch == ' ' || ch == '\n') {
            n += (run + 2) / 3;
            run = 0;
          } else {
            ++run;
          }
        }
        return n;
      };
      Prompt lumps = bytes;
      calibrate(lumps, target / 3, lumpy);
      EXPECT_EQ(lumpy(lumps.text()), target / 3);
    }
  }
}

// tinyGLM's own tokenizer and chat template, counted as the server counts a request.
TEST(Calibration, ExactWithTinyGlmByteTokenizer) {
  for (Endpoint e : {Endpoint::kCompletions, Endpoint::kChat}) {
    for (const std::string& b : kSingleBuilders) {
      const CaseSpec c = make_case(b, e, 700, 2);
      const json base = e == Endpoint::kChat ? kNoThinking : json::object();
      for (const Prompt& p : build_case_prompts(c, 0, base, byte_tokens)) {
        json body = base;
        body.update(p.body_fields());
        EXPECT_EQ(byte_tokens(body), 700) << b << " " << to_string(e);
        EXPECT_EQ(p.tokens, 700);
      }
    }
  }
}

TEST(Calibration, FailsClearlyWhenTheFixedTextIsTooLong) {
  const CaseSpec c = make_case("arithmetic", Endpoint::kCompletions, 20, 1);
  try {
    build_case_prompts(c, 0, {}, byte_tokens);
    ADD_FAILURE() << "fitted an arithmetic prompt into 20 tokens";
  } catch (const Error& e) {
    const std::string m = e.message();
    EXPECT_NE(m.find("case t"), std::string::npos) << m;
    EXPECT_NE(m.find("exactly 20 tokens"), std::string::npos) << m;
    EXPECT_NE(m.find("fixed text"), std::string::npos) << m;
  }
  // A counter no pad piece can move one token at a time: every piece costs two.
  Prompt p =
      build_case_prompts(make_case("prose", Endpoint::kCompletions, 300, 1), 0, {}, byte_tokens)[0];
  const TextTokenCounter doubled = [](const std::string& s) { return int32_t(2 * s.size()); };
  EXPECT_THROW(calibrate(p, 601, doubled), Error);
}

TEST(Calibration, WithoutACounterPromptsAreEstimated) {
  const auto p = build_case_prompts(make_case("prose", Endpoint::kCompletions, 1000, 1), 0, {}, {});
  EXPECT_EQ(p[0].tokens, -1);
  EXPECT_GT(p[0].text().size(), 3000u);
}

TEST(PromptBuilder, ArithmeticStatesItsOperandsAndAnswer) {
  const auto prompts = build_case_prompts(make_case("arithmetic", Endpoint::kChat, 500, 6), 0,
                                          kNoThinking, byte_tokens);
  const std::regex ops(
      R"(a = (\d+), b = (\d+), c = (\d+), d = (\d+), e = (\d+)\. Work it out step by step)");
  std::set<std::string> answers;
  for (const Prompt& p : prompts) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(p.text(), m, ops)) << p.text();
    const int64_t a = std::stoll(m[1]), b = std::stoll(m[2]), c = std::stoll(m[3]),
                  d = std::stoll(m[4]), e = std::stoll(m[5]);
    EXPECT_TRUE(a >= 1000 && a <= 9999 && c >= 1000 && c <= 9999);
    EXPECT_TRUE(b >= 13 && b <= 97 && d >= 13 && d <= 97);
    EXPECT_TRUE(e >= 100 && e <= 999);
    EXPECT_EQ(p.expected, std::to_string(a * b - c * d + e));
    answers.insert(p.expected);
  }
  EXPECT_EQ(answers.size(), prompts.size());
}

TEST(PromptBuilder, NeedleHasOneTwoHopPath) {
  for (int32_t tokens : {600, 5000}) {
    const Prompt p = build_case_prompts(make_case("needle", Endpoint::kCompletions, tokens, 1), 0,
                                        {}, byte_tokens)[0];
    const std::string& t = p.text();
    std::smatch q;
    ASSERT_TRUE(std::regex_search(t, q, std::regex(R"(value for key ([a-z]{6})\?)")));
    const std::string key = q[1];
    std::smatch row1;
    ASSERT_TRUE(
        std::regex_search(t, row1, std::regex("key " + key + " -> code ([a-z]{4}-\\d{4})")));
    const std::string code = row1[1];
    std::smatch row2;
    ASSERT_TRUE(std::regex_search(t, row2, std::regex("code " + code + " -> value (\\d{8})")));
    EXPECT_EQ(row2[1], p.expected);
    EXPECT_EQ(p.expected.size(), 8u);
    // The key, code and value each occur exactly where the path needs them.
    auto count = [&](const std::string& s) {
      size_t n = 0;
      for (size_t at = t.find(s); at != std::string::npos; at = t.find(s, at + 1)) ++n;
      return n;
    };
    EXPECT_EQ(count("key " + key + " "), 1u);
    EXPECT_EQ(count(code), 2u);
    EXPECT_EQ(count(p.expected), 1u);
  }
}

// prompt.depth places the needle's row in each table at that fraction of it: recall by depth.
TEST(PromptBuilder, NeedleDepthPlacesTheNeedle) {
  for (const double depth : {0.0, 0.1, 0.5, 0.9, 1.0}) {
    SCOPED_TRACE(depth);
    CaseSpec c = make_case("needle", Endpoint::kCompletions, 6000, 1);
    c.prompt.depth = depth;
    const Prompt p = build_case_prompts(c, 0, {}, byte_tokens)[0];
    const std::string& t = p.text();
    const size_t table1 = t.find("Table 1"), table2 = t.find("Table 2"), end = t.find("Question:");
    std::smatch q;
    ASSERT_TRUE(std::regex_search(t, q, std::regex(R"(value for key ([a-z]{6})\?)")));
    const size_t at1 = t.find("key " + q[1].str() + " -> code"), at2 = t.find(p.expected);
    // The needle's offset within its table, as a fraction of the table's bytes.
    const double f1 = double(at1 - table1) / double(table2 - table1);
    const double f2 = double(at2 - table2) / double(end - table2);
    EXPECT_NEAR(f1, depth, 0.05) << "Table 1";
    EXPECT_NEAR(f2, depth, 0.05) << "Table 2";
  }
  // Without a depth: 37 % and 61 %, the prompts committed bundles were made with.
  const Prompt p = build_case_prompts(make_case("needle", Endpoint::kCompletions, 6000, 1), 0, {},
                                      byte_tokens)[0];
  const std::string& t = p.text();
  const size_t table2 = t.find("Table 2");
  EXPECT_NEAR(double(t.find(p.expected) - table2) / double(t.find("Question:") - table2), 0.61,
              0.05);
}

TEST(PromptBuilder, ToolCallOffersTheToolsAndNamesTheCall) {
  const CaseSpec c = make_case("tool_call", Endpoint::kChat, 1600, 12);
  const auto prompts = build_case_prompts(c, 0, kNoThinking, byte_tokens);
  EXPECT_EQ(texts(prompts), texts(build_case_prompts(c, 0, kNoThinking, byte_tokens)));
  std::set<std::string> called;
  for (const Prompt& p : prompts) {
    const json body = p.body_fields();
    ASSERT_TRUE(body.contains("tools") && body["tools"].size() == 3) << body.dump();
    std::vector<std::string> offered;
    for (const json& t : body["tools"]) offered.push_back(t["function"]["name"]);
    EXPECT_EQ(offered, (std::vector<std::string>{"get_weather", "lookup_order", "add_numbers"}));
    const json call = json::parse(p.expected);
    called.insert(call["name"].get<std::string>());
    // The question states every argument's value.
    for (const auto& [key, value] : call["arguments"].items()) {
      const std::string v = value.is_string() ? value.get<std::string>() : value.dump();
      EXPECT_NE(p.text().find(v), std::string::npos) << key << " " << v << " in " << p.text();
    }
    EXPECT_EQ(p.tokens, 1600);
    EXPECT_EQ(p.text().rfind(p.marker + "\nBackground notes, not needed for the task:\n", 0), 0u);
  }
  EXPECT_EQ(called.size(), 3u) << "twelve requests ask for each of the three tools";
}

TEST(PromptBuilder, JsonSchemaStatesItsSchemaAndValues) {
  for (const bool constrained : {false, true}) {
    SCOPED_TRACE(constrained);
    CaseSpec c = make_case("json_schema", Endpoint::kChat, 900, 10);
    c.prompt.constrained = constrained;
    std::set<size_t> sizes;
    for (const Prompt& p : build_case_prompts(c, 0, kNoThinking, byte_tokens)) {
      const json schema = json::parse(p.expected);
      const std::string& t = p.text();
      // The schema as the prompt states it (curriculum.py's json.dumps spelling) is the one graded.
      std::smatch m;
      ASSERT_TRUE(std::regex_search(t, m, std::regex("\nSchema: (\\{.*\\})\nValues: (.*)\n")));
      EXPECT_EQ(json::parse(m[1].str()), schema);
      EXPECT_NE(m[1].str().find("{\"type\": \"object\", \"properties\": {"), std::string::npos);
      const std::string values = m[2];
      for (const json& key : schema["required"])
        EXPECT_NE(values.find(key.get<std::string>() + " = "), std::string::npos) << values;
      sizes.insert(schema["required"].size());
      EXPECT_EQ(schema["properties"].size(), schema["required"].size());
      const json body = p.body_fields();
      if (constrained)
        EXPECT_EQ(body.at("response_format").at("json_schema").at("schema"), schema);
      else
        EXPECT_FALSE(body.contains("response_format"));
      EXPECT_EQ(p.tokens, 900);
    }
    EXPECT_GE(*sizes.begin(), 2u);
    EXPECT_LE(*sizes.rbegin(), 5u);
    EXPECT_GT(sizes.size(), 1u);
  }
}

TEST(PromptBuilder, ConversationTurnsExtendTheirSession) {
  CaseSpec c = make_case("conversation", Endpoint::kChat, 0, 5);
  c.prompt.tokens = {1500, 800, 2100, 1300, 2600};
  c.prompt.sessions = {0, 1, 0, 1, 0};
  c.prompt.system_tokens = 600;
  const auto p = build_case_prompts(c, 0, kNoThinking, byte_tokens);
  ASSERT_EQ(p.size(), 5u);
  for (size_t i = 0; i < p.size(); ++i) {
    json body = kNoThinking;
    body.update(p[i].body_fields());
    EXPECT_EQ(byte_tokens(body), c.prompt.tokens[i]) << "turn " << i;
    EXPECT_EQ(p[i].messages.front().role, "system");
    EXPECT_EQ(p[i].messages.front().content, p[0].messages.front().content);  // shared system
  }
  // Turn 2 of session 0 resends turn 0's messages, then a reply, then its new user message.
  ASSERT_EQ(p[2].messages.size(), p[0].messages.size() + 2);
  for (size_t k = 0; k < p[0].messages.size(); ++k)
    EXPECT_EQ(p[2].messages[k].content, p[0].messages[k].content);
  EXPECT_EQ(p[2].messages[p[0].messages.size()].role, "assistant");
  EXPECT_EQ(p[4].messages.size(), p[2].messages.size() + 2);
  EXPECT_EQ(p[3].messages[1].content, p[1].messages[1].content);  // session 1's own history
  EXPECT_NE(p[1].messages[1].content, p[0].messages[1].content);
  EXPECT_EQ(p[4].text().rfind(p[4].marker, 0), 0u);
}

TEST(PromptBuilder, TokenizeBodyKeepsOnlyRenderingFields) {
  const json chat = {{"model", "m"},
                     {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                     {"chat_template_kwargs", {{"enable_thinking", false}}},
                     {"max_tokens", 5},
                     {"stream", true},
                     {"prompt", "ignored"}};
  const json t = tokenize_body(chat);
  EXPECT_EQ(t, json({{"model", "m"},
                     {"messages", chat["messages"]},
                     {"chat_template_kwargs", chat["chat_template_kwargs"]}}));
  const json completion = {{"prompt", "abc"}, {"max_tokens", 5}, {"ignore_eos", true}};
  EXPECT_EQ(tokenize_body(completion), json({{"prompt", "abc"}}));
}

}  // namespace
}  // namespace sparkglm::workloads
