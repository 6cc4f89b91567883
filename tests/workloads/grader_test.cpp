#include "workloads/grader.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "engine/core/sha256.h"
#include "engine/text/utf8_stream.h"

namespace sparkglm::workloads {
namespace {

using harness::RequestRecord;

// A case of `requests` requests over `repetitions` repetitions (and one warmup), and a plan whose
// expected values are "v<index>" unless given.
struct Fixture {
  CaseSpec spec;
  CasePlan plan;
};

Fixture make_fixture(const std::string& id, int32_t requests, int32_t repetitions,
                     const std::vector<std::string>& expected = {}) {
  Fixture f;
  f.spec.id = id;
  f.spec.max_tokens = 4;
  f.spec.requests = requests;
  f.spec.repetitions = repetitions;
  f.plan.case_id = id;
  for (int32_t rep = -1; rep < repetitions; ++rep) {
    RepetitionPlan r;
    r.repetition = rep;
    for (int32_t i = 0; i < requests; ++i) {
      harness::RequestSpec s;
      s.case_id = id;
      s.repetition = rep;
      s.index = i;
      s.marker = "[[sg:s-" + id + ":" + std::to_string(i) + "]]";
      r.requests.push_back(s);
      r.expected.push_back(expected.empty() ? "" : expected[size_t(i)]);
    }
    f.plan.repetitions.push_back(r);
  }
  return f;
}

std::string ids_sha(const std::vector<int32_t>& ids) {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) text += ',';
    text += std::to_string(ids[i]);
  }
  return sha256_hex(text);
}

// Good records for every planned request (warmups included, which graders must skip).
std::vector<RequestRecord> records_for(const Fixture& f) {
  std::vector<RequestRecord> out;
  for (const RepetitionPlan& rep : f.plan.repetitions)
    for (const harness::RequestSpec& s : rep.requests) {
      RequestRecord r;
      r.case_id = s.case_id;
      r.repetition = s.repetition;
      r.index = s.index;
      r.marker = s.marker;
      r.ok = true;
      r.completion_tokens = f.spec.max_tokens;
      r.token_ids = {10 + s.index, 20, 30, 40};
      r.token_ids_sha256 = ids_sha(r.token_ids);
      r.output_text = "text of " + s.marker.substr(2);  // no marker echoed
      out.push_back(r);
    }
  return out;
}

RequestRecord& find(std::vector<RequestRecord>& rs, int32_t rep, int32_t index,
                    const std::string& case_id = "") {
  for (RequestRecord& r : rs)
    if (r.repetition == rep && r.index == index && (case_id.empty() || r.case_id == case_id))
      return r;
  throw std::runtime_error("no such record");
}

GradeResult run(const std::string& name, const Fixture& f, const std::vector<RequestRecord>& rs,
                nlohmann::json params = nlohmann::json::object()) {
  return grade({name, params}, f.spec, f.plan, rs);
}

TEST(Grader, ExactLength) {
  Fixture f = make_fixture("a", 2, 3);
  auto rs = records_for(f);
  const GradeResult ok = run("exact_length", f, rs);
  EXPECT_TRUE(ok.pass) << ok.detail;
  EXPECT_EQ(ok.observed, 0);

  auto short_output = rs;
  find(short_output, 1, 1).completion_tokens = 3;
  find(short_output, 1, 1).token_ids.pop_back();
  GradeResult g = run("exact_length", f, short_output);
  EXPECT_FALSE(g.pass);
  EXPECT_NE(g.detail.find("repetition 1 request 1: 3 completion tokens, expected 4"),
            std::string::npos)
      << g.detail;

  auto no_ids = rs;
  find(no_ids, 0, 0).token_ids.clear();
  EXPECT_FALSE(run("exact_length", f, no_ids).pass);

  auto failed = rs;
  find(failed, 2, 0).ok = false;
  find(failed, 2, 0).error = "timeout";
  g = run("exact_length", f, failed);
  EXPECT_FALSE(g.pass);
  EXPECT_NE(g.detail.find("failed: timeout"), std::string::npos) << g.detail;

  auto missing = rs;
  missing.pop_back();
  EXPECT_FALSE(run("exact_length", f, missing).pass);

  auto warmup_only_bad = rs;
  find(warmup_only_bad, -1, 0).completion_tokens = 1;  // warmups are never graded
  EXPECT_TRUE(run("exact_length", f, warmup_only_bad).pass);
}

std::string structured_text(int n, int bad_at = -1, const std::string& wrap = "json") {
  std::string t = "Here it is:\n```" + wrap + "\n[";
  for (int i = 1; i <= n; ++i) {
    const int square = i == bad_at ? i * i + 1 : i * i;
    t += std::string(i > 1 ? ", " : "") + "{\"index\": " + std::to_string(i) +
         ", \"square\": " + std::to_string(square) + "}";
  }
  return t + "]\n```\n";
}

TEST(Grader, Structured50) {
  EXPECT_EQ(check_structured_50(structured_text(50)), "");
  EXPECT_EQ(check_structured_50(structured_text(50, -1, "")), "");
  EXPECT_NE(check_structured_50(structured_text(49)), "");
  EXPECT_NE(check_structured_50(structured_text(51)), "");
  EXPECT_NE(check_structured_50(structured_text(50, 17)).find("expected square 289"),
            std::string::npos);
  std::string zero_based = structured_text(50);
  // Indices 0..49 are not this check's convention (1..50).
  std::string shifted = "[";
  for (int i = 0; i < 50; ++i)
    shifted += std::string(i ? "," : "") + "{\"index\":" + std::to_string(i) +
               ",\"square\":" + std::to_string(i * i) + "}";
  EXPECT_NE(check_structured_50(shifted + "]"), "");
  std::string extra_key = structured_text(50);
  extra_key.replace(extra_key.find("{\"index\": 3,"), 12, "{\"n\": 1, \"index\": 3,");
  EXPECT_NE(check_structured_50(extra_key).find("exactly the keys"), std::string::npos);
  EXPECT_NE(check_structured_50("no json at all"), "");

  Fixture f = make_fixture("s", 1, 3);
  auto rs = records_for(f);
  for (auto& r : rs) r.output_text = structured_text(50);
  EXPECT_TRUE(run("structured_50", f, rs).pass);
  find(rs, 2, 0).output_text = structured_text(50, 50);
  EXPECT_FALSE(run("structured_50", f, rs).pass);
}

TEST(Grader, Arithmetic) {
  EXPECT_EQ(last_answer("Answer: 12\nwait, Answer: -1,234"), "-1234");
  EXPECT_EQ(last_answer("**Answer:** 42"), "42");
  EXPECT_EQ(last_answer("Answer: \xE2\x88\x92"
                        "7"),
            "-7");
  EXPECT_EQ(last_answer("the answer is 5"), "");

  Fixture f = make_fixture("m", 2, 1, {"-1234", "5678"});
  auto rs = records_for(f);
  find(rs, 0, 0).output_text = "1000*2 = 2000 ... Answer: -1,234";
  find(rs, 0, 1).output_text = "Answer: 1\nLet me recheck.\nAnswer: 5678";
  GradeResult g = run("arithmetic", f, rs);
  EXPECT_TRUE(g.pass) << g.detail;
  find(rs, 0, 1).output_text = "Answer: 5678\nActually, Answer: 5679";
  g = run("arithmetic", f, rs);
  EXPECT_FALSE(g.pass);
  EXPECT_NE(g.detail.find("last answer 5679, expected 5678"), std::string::npos) << g.detail;
  find(rs, 0, 1).output_text = "5678";
  EXPECT_FALSE(run("arithmetic", f, rs).pass) << "a bare number is not an Answer: line";
}

TEST(Grader, Needle) {
  Fixture f = make_fixture("n", 2, 1, {"12345678", "87654321"});
  auto rs = records_for(f);
  find(rs, 0, 0).output_text = "The value is 12345678.";
  find(rs, 0, 1).output_text = "87654321";
  EXPECT_TRUE(run("needle", f, rs).pass);
  find(rs, 0, 1).output_text = "8765432";
  const GradeResult g = run("needle", f, rs);
  EXPECT_FALSE(g.pass);
  EXPECT_EQ(g.observed, 1);
  Fixture none = make_fixture("n", 1, 1);  // a plan without expected values cannot pass
  EXPECT_FALSE(run("needle", none, records_for(none)).pass);
}

TEST(Grader, Isolation) {
  Fixture f = make_fixture("i", 4, 1);
  auto rs = records_for(f);
  EXPECT_TRUE(run("isolation", f, rs).pass);
  EXPECT_FALSE(run("isolation", f, rs, {{"require_own", true}}).pass);  // nothing echoed
  for (auto& r : rs) r.output_text = r.marker + " then text";
  EXPECT_TRUE(run("isolation", f, rs, {{"require_own", true}}).pass);
  find(rs, 0, 2).output_text += " and " + find(rs, 0, 3).marker;
  GradeResult g = run("isolation", f, rs);
  EXPECT_FALSE(g.pass);
  EXPECT_NE(g.detail.find("foreign marker [[sg:s-i:3]]"), std::string::npos) << g.detail;
  // A marker from anywhere else (another run, another case) is foreign too, also in reasoning.
  auto other = records_for(f);
  find(other, 0, 0).reasoning_text = "[[sg:elsewhere:9]]";
  EXPECT_FALSE(run("isolation", f, other).pass);
  EXPECT_TRUE(needs_real_model({"isolation", {{"require_own", true}}}));
  EXPECT_FALSE(needs_real_model({"isolation", nlohmann::json::object()}));
}

TEST(Grader, ToolCall) {
  const std::string weather =
      R"({"name":"get_weather","arguments":{"city":"Oslo","unit":"celsius"}})";
  const std::string sum = R"({"name":"add_numbers","arguments":{"x":3,"y":4}})";
  Fixture f = make_fixture("t", 2, 1, {weather, sum});
  auto rs = records_for(f);
  find(rs, 0, 0).tool_calls = {{"get_weather", R"({"city":"Bergen","unit":"fahrenheit"})"}};
  find(rs, 0, 1).tool_calls = {{"add_numbers", R"({"x":8,"y":9})"}};
  GradeResult g = run("tool_call", f, rs);
  EXPECT_TRUE(g.pass) << g.detail << " (values are not compared, names and types are)";
  EXPECT_EQ(g.requests, 2);
  EXPECT_EQ(g.failed_requests, 0);

  const auto why = [&](std::vector<harness::ToolCallRecord> calls) {
    find(rs, 0, 1).tool_calls = std::move(calls);
    return check_tool_call(find(rs, 0, 1).tool_calls, sum);
  };
  EXPECT_EQ(why({}), "0 tool calls, expected one call of add_numbers");
  EXPECT_EQ(why({{"add_numbers", R"({"x":1,"y":2})"}, {"add_numbers", R"({"x":1,"y":2})"}}),
            "2 tool calls, expected one call of add_numbers");
  EXPECT_EQ(why({{"lookup_order", R"({"order_id":"A-1"})"}}),
            "called lookup_order, expected add_numbers");
  EXPECT_NE(why({{"add_numbers", R"({"x":1,)"}}).find("arguments are not JSON"), std::string::npos);
  EXPECT_EQ(why({{"add_numbers", R"([1,2])"}}), "arguments are array, expected an object");
  EXPECT_EQ(why({{"add_numbers", R"({"x":1})"}}), "arguments lack y");
  EXPECT_EQ(why({{"add_numbers", R"({"x":1,"y":"2"})"}}), "argument y is string, expected integer");
  EXPECT_EQ(why({{"add_numbers", R"({"x":1,"y":2,"z":3})"}}),
            "argument z is not one of add_numbers's");
  // The last one left in place: one of two requests fails, with where and why.
  g = run("tool_call", f, rs);
  EXPECT_FALSE(g.pass);
  EXPECT_EQ(g.failed_requests, 1);
  EXPECT_DOUBLE_EQ(g.pass_rate(), 0.5);
  EXPECT_NE(g.detail.find("repetition 0 request 1: argument z"), std::string::npos) << g.detail;
  EXPECT_TRUE(needs_real_model({"tool_call", nlohmann::json::object()}));
}

TEST(Grader, JsonSchema) {
  const std::string schema =
      R"({"type":"object","properties":{"age":{"type":"integer"},"score":{"type":"number"},)"
      R"("tags":{"type":"array","items":{"type":"string"}}},"required":["age","tags"]})";
  EXPECT_EQ(check_json_schema(" {\"age\": 3, \"tags\": [\"a\"], \"score\": 2}\n", schema), "")
      << "an integer is a number; whitespace around the value is allowed";
  EXPECT_EQ(check_json_schema(R"({"age": 3, "tags": [], "extra": true})", schema), "")
      << "a key the schema does not name is allowed unless additionalProperties is false";
  EXPECT_EQ(check_json_schema(R"({"age": 3})", schema),
            "the reply lacks the required key \"tags\"");
  EXPECT_EQ(check_json_schema(R"({"age": 3.5, "tags": []})", schema),
            "the reply.age is number, expected integer");
  EXPECT_EQ(check_json_schema(R"({"age": 3, "tags": ["a", 2]})", schema),
            "the reply.tags[1] is integer, expected string");
  EXPECT_EQ(check_json_schema(R"([{"age": 3, "tags": []}])", schema),
            "the reply is array, expected object");
  EXPECT_EQ(check_json_schema("  ", schema), "the reply is empty, expected a JSON object");
  EXPECT_NE(check_json_schema(R"({"age": 3, "tags": []} and more)", schema)
                .find("the reply is not one JSON value"),
            std::string::npos);
  EXPECT_NE(check_json_schema(std::string(100, '[') + std::string(100, ']'), schema)
                .find("the reply is not one JSON value"),
            std::string::npos)
      << "nesting past the reply limit is refused, not recursed into";
  const std::string closed =
      R"({"type":"object","properties":{"a":{"type":"boolean"}},"additionalProperties":false})";
  EXPECT_EQ(check_json_schema(R"({"a": true, "b": 1})", closed),
            "the reply has the key \"b\", which the schema does not allow");

  Fixture f = make_fixture("j", 3, 2, {schema, schema, schema});
  auto rs = records_for(f);
  for (auto& r : rs) r.output_text = R"({"age": 1, "tags": ["x"]})";
  find(rs, 1, 2).output_text = R"({"age": 1)";
  find(rs, 0, 0).ok = false;
  find(rs, 0, 0).error = "timeout";
  GradeResult g = run("json_schema", f, rs);
  EXPECT_FALSE(g.pass);
  EXPECT_EQ(g.requests, 6);
  EXPECT_EQ(g.failed_requests, 2) << "a failed request fails, and so does a bad reply";
  EXPECT_NEAR(g.pass_rate(), 4.0 / 6, 1e-12);
  // A record missing counts as a failed request.
  rs.erase(std::find_if(rs.begin(), rs.end(),
                        [](const RequestRecord& r) { return r.repetition == 0 && r.index == 1; }));
  g = run("json_schema", f, rs);
  EXPECT_EQ(g.failed_requests, 3) << g.detail;
}

TEST(Grader, ADetailQuotingAReplyCutMidCharacterIsStillText) {
  // An unterminated string of two-byte characters: the parse error quotes it and the grader cuts
  // the message at 200 bytes, one of the two offsets in the middle of a character. The detail goes
  // into a bundle's JSON, which refuses ill-formed UTF-8 (an untrained model's reply did this).
  const std::string schema = R"({"type":"object"})";
  std::string e_acute;
  for (int i = 0; i < 150; ++i) e_acute += "\xC3\xA9";
  for (const std::string pad : {"", "a"}) {
    Fixture f = make_fixture("j", 1, 1, {schema});
    auto rs = records_for(f);
    for (auto& r : rs) r.output_text = "{\"" + pad + e_acute;
    const GradeResult g = run("json_schema", f, rs);
    EXPECT_FALSE(g.pass);
    EXPECT_NE(g.detail.find("is not one JSON value"), std::string::npos) << g.detail;
    EXPECT_EQ(valid_utf8(g.detail), g.detail) << "pad \"" << pad << "\"";
    EXPECT_NO_THROW(to_json(g).dump());
  }
}

TEST(Grader, RepetitionIdentical) {
  Fixture f = make_fixture("r", 2, 3);
  auto rs = records_for(f);
  EXPECT_TRUE(run("repetition_identical", f, rs).pass);
  find(rs, -1, 1).token_ids_sha256 = "warmup differs";  // warmups are not compared
  EXPECT_TRUE(run("repetition_identical", f, rs).pass);
  find(rs, 2, 1).token_ids_sha256 = ids_sha({1, 2, 3, 4});
  GradeResult g = run("repetition_identical", f, rs);
  EXPECT_FALSE(g.pass);
  EXPECT_EQ(g.observed, 1);
  EXPECT_NE(g.detail.find("request 1 differs across repetitions"), std::string::npos) << g.detail;
  auto empty = records_for(f);
  for (auto& r : empty) r.token_ids_sha256.clear();  // no ids returned: nothing to compare
  EXPECT_FALSE(run("repetition_identical", f, empty).pass);
}

TEST(Grader, DeterminismAgainstReferenceCase) {
  Fixture c1 = make_fixture("det_c1", 4, 2);
  Fixture c4 = make_fixture("det_c4", 4, 2);
  auto rs = records_for(c1);
  for (const RequestRecord& r : records_for(c4)) rs.push_back(r);
  const nlohmann::json params = {{"reference_case", "det_c1"}};
  GradeResult g = run("determinism", c4, rs, params);
  EXPECT_TRUE(g.pass) << g.detail;
  find(rs, 1, 3, "det_c4").token_ids_sha256 = ids_sha({9});
  g = run("determinism", c4, rs, params);
  EXPECT_FALSE(g.pass);
  EXPECT_NE(g.detail.find("request 3 differs from det_c1"), std::string::npos) << g.detail;
  EXPECT_FALSE(run("determinism", c4, records_for(c4), params).pass) << "no reference records";

  // Equal token ids with different logprob bits are a different output.
  rs = records_for(c1);
  for (const RequestRecord& r : records_for(c4)) rs.push_back(r);
  for (RequestRecord& r : rs) r.logprobs_sha256 = std::string(64, 'a');
  EXPECT_TRUE(run("determinism", c4, rs, params).pass);
  find(rs, 0, 2, "det_c4").logprobs_sha256 = std::string(64, 'b');
  g = run("determinism", c4, rs, params);
  EXPECT_FALSE(g.pass);
  EXPECT_NE(g.detail.find("logprobs bbbbbbbbbbbb"), std::string::npos) << g.detail;
}

TEST(Grader, WorkloadGradesEveryGraderInOrder) {
  WorkloadSpec w;
  Fixture f = make_fixture("a", 1, 3);
  f.spec.graders = {{"exact_length", {}}, {"repetition_identical", {}}};
  w.cases = {f.spec};
  WorkloadPlan p;
  p.cases = {f.plan};
  const auto results = grade_workload(w, p, records_for(f));
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].name, "exact_length");
  EXPECT_EQ(results[1].name, "repetition_identical");
  EXPECT_TRUE(results[0].pass && results[1].pass);
  const nlohmann::json j = to_json(results[0]);
  for (const char* key : {"name", "case", "pass", "observed", "expected", "detail"})
    EXPECT_TRUE(j.contains(key)) << key;
}

}  // namespace
}  // namespace sparkglm::workloads
