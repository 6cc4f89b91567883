// Structured output through the scheduler on tinyglm-micro's dummy weights: whatever the logits
// say, a request with a compiled grammar ends with eos on a value valid under its schema, greedy
// or sampled, alone or batched with an unconstrained request.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/core/error.h"
#include "engine/runtime/scheduler.h"
#include "engine/text/byte_tokenizer.h"
#include "engine/text/grammar/compiled_grammar.h"
#include "tests/support/micro_model.h"
#include "tests/text/json_schema_check.h"

namespace sparkglm {
namespace {

using json = nlohmann::json;

const json kSchema = json::parse(R"({"type":"object","properties":{
    "id":{"type":"integer","minimum":1,"maximum":500},
    "tags":{"type":"array","items":{"enum":["x","y"]},"maxItems":3},
    "name":{"type":"string","maxLength":5}},"required":["id","tags","name"],
    "additionalProperties":false})");

struct Output {
  std::string text;
  FinishReason finish = FinishReason::kNone;
  std::vector<int32_t> ids;
};

TEST(StructuredOutput, DummyWeightsProduceSchemaValidJson) {
  const LoadedModel& m = testing::micro_model();
  ThreadPool pool{2};
  cpu::CpuModelRunner runner(m.config, m.weights, {64, 16, 4}, pool);
  Scheduler scheduler(runner, SchedulerLimits{});
  const TokenVocabulary vocab =
      TokenVocabulary::for_byte_tokenizer(m.config.vocab_size, m.config.eos_token_ids);
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kJsonSchema;
  c.schema = kSchema;
  auto grammar = compile_output_constraint(c, vocab);

  std::vector<Output> out(4);
  for (int i = 0; i < 4; ++i) {
    GenerationRequest r;
    r.prompt = {1, 2, 3, int32_t(i + 4)};
    r.sampling.max_tokens = 400;
    r.sampling.temperature = i % 2 ? 1.0f : 0.0f;
    r.sampling.seed = 17 + i;
    if (i < 3) {  // the last one runs unconstrained beside them
      r.constraint = c;
      r.grammar = grammar;
    }
    r.on_event = [&out, i](const RequestEvent& e) {
      for (const auto& t : e.tokens) out[size_t(i)].ids.push_back(t.id);
      if (e.finish != FinishReason::kNone) out[size_t(i)].finish = e.finish;
    };
    scheduler.add(std::make_shared<RequestHandle>(i + 1), std::move(r));
  }
  for (int guard = 0; !scheduler.idle() && guard < 5000; ++guard) scheduler.step();
  for (int i = 0; i < 3; ++i) {
    const Output& o = out[size_t(i)];
    ASSERT_EQ(o.finish, FinishReason::kStop) << "request " << i;
    std::string text;
    for (size_t k = 0; k + 1 < o.ids.size(); ++k) {
      ASSERT_LT(o.ids[k], 256) << "a special token inside the value";
      text += char(o.ids[k]);
    }
    EXPECT_TRUE(vocab.is_eos(o.ids.back()));
    json v;
    ASSERT_NO_THROW(v = json::parse(text)) << text;
    EXPECT_EQ(testing::check_schema(v, kSchema, kSchema), "") << text;
  }
}

// Issue 20 (tool-eval-bench's tool_choice="required" probe got a 200 without a call): with thinking
// on, a constrained request that drew eos inside its reasoning ended with no value. eos is masked
// until the value is complete, so each request either runs out of tokens or ends on its value.
TEST(StructuredOutput, AConstrainedAnswerCannotEndInsideItsReasoning) {
  const LoadedModel& m = testing::micro_model();
  ThreadPool pool{2};
  cpu::CpuModelRunner runner(m.config, m.weights, {64, 16, 4}, pool);
  Scheduler scheduler(runner, SchedulerLimits{});
  const TokenVocabulary vocab =
      TokenVocabulary::for_byte_tokenizer(m.config.vocab_size, m.config.eos_token_ids);
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kChoice;
  c.choices = {"yes", "no"};
  c.after_reasoning = true;
  auto grammar = compile_output_constraint(c, vocab);
  constexpr int kRequests = 8;
  std::vector<Output> out(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    GenerationRequest r;
    r.prompt = {1, 2, 3, int32_t(i + 4)};
    r.sampling.max_tokens = 600;
    r.sampling.temperature = i == 0 ? 0.0f : 1.5f;
    r.sampling.seed = 5 + i;
    r.constraint = c;
    r.grammar = grammar;
    r.on_event = [&out, i](const RequestEvent& e) {
      for (const auto& t : e.tokens) out[size_t(i)].ids.push_back(t.id);
      if (e.finish != FinishReason::kNone) out[size_t(i)].finish = e.finish;
    };
    scheduler.add(std::make_shared<RequestHandle>(i + 1), std::move(r));
  }
  for (int guard = 0; !scheduler.idle() && guard < 20000; ++guard) scheduler.step();
  int answered = 0;
  for (int i = 0; i < kRequests; ++i) {
    const Output& o = out[size_t(i)];
    if (o.finish == FinishReason::kLength) continue;
    ASSERT_EQ(o.finish, FinishReason::kStop) << "request " << i;
    const auto end_think = std::find(o.ids.begin(), o.ids.end(), ByteTokenizer::kEndThink);
    ASSERT_NE(end_think, o.ids.end()) << "request " << i << " stopped inside its reasoning";
    const std::string value(end_think + 1, o.ids.end() - 1);
    EXPECT_TRUE(value == "yes" || value == "no") << "request " << i << ": " << value;
    EXPECT_TRUE(vocab.is_eos(o.ids.back()));
    ++answered;
  }
  EXPECT_GT(answered, 0) << "no request closed its reasoning: the test checked nothing";
}

TEST(StructuredOutput, AConstraintWithoutItsGrammarIsRefused) {
  const LoadedModel& m = testing::micro_model();
  ThreadPool pool{1};
  cpu::CpuModelRunner runner(m.config, m.weights, {16, 16, 1}, pool);
  Scheduler scheduler(runner, SchedulerLimits{1, 1, 8192, 4096});
  GenerationRequest r;
  r.prompt = {1, 2};
  r.sampling.max_tokens = 4;
  r.constraint.kind = OutputConstraint::Kind::kJsonObject;
  EXPECT_THROW(scheduler.check_fits(r), Error);
  r.grammar = compile_output_constraint(
      r.constraint, TokenVocabulary::for_byte_tokenizer(m.config.vocab_size + 1, {0}));
  EXPECT_THROW(scheduler.check_fits(r), Error);  // another vocabulary
}

}  // namespace
}  // namespace sparkglm
