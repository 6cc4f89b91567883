// A RequestRecord is one line of requests.jsonl: it must come back from JSON exactly, and a line
// that is not a record must say which field is wrong.
#include "harness/request_record.h"

#include <gtest/gtest.h>

#include "engine/core/error.h"

namespace sparkglm::harness {
namespace {

RequestRecord filled() {
  RequestRecord r;
  r.arm = "candidate";
  r.workload = "tinyglm-gate";
  r.case_id = "decode_c1";
  r.repetition = -1;
  r.index = 3;
  r.marker = "[m-0003]";
  r.start_s = 0.125;
  r.first_output_s = 0.3;
  r.first_visible_s = std::nullopt;
  r.output_event_s = {0.3, 0.31, 0.3275};
  r.end_s = 0.5;
  r.ok = true;
  r.http_status = 200;
  r.finish_reason = "length";
  r.prompt_tokens = 128;
  r.completion_tokens = 3;
  r.cached_tokens = 16;
  r.reasoning_tokens = 3;
  r.token_ids = {1, 22, 333};
  r.reasoning_text = "th\xc3\xa9";
  r.output_sha256 = std::string(64, 'a');
  r.reasoning_sha256 = std::string(64, 'b');
  r.token_ids_sha256 = std::string(64, 'c');
  r.client_overhead_median_s = 1.5e-6;
  r.client_overhead_max_s = 4e-5;
  r.client_thread_cpu_s = 2.5e-4;
  r.events_per_read = {0, 1, 2, 0};
  r.tool_calls = {{"add_numbers", R"({"x":1,"y":2})"}};
  return r;
}

TEST(RequestRecord, RoundTripsThroughJsonText) {
  const nlohmann::json j = to_json(filled());
  const RequestRecord back = record_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(to_json(back), j);
  EXPECT_FALSE(back.first_visible_s);
  EXPECT_EQ(back.first_output_s.value(), 0.3);
  EXPECT_EQ(back.output_event_s, filled().output_event_s);
  EXPECT_EQ(back.token_ids, filled().token_ids);
  EXPECT_TRUE(j["first_visible_s"].is_null());
  EXPECT_EQ(back.events_per_read, filled().events_per_read);
  EXPECT_EQ(back.client_thread_cpu_s, 2.5e-4);
  EXPECT_EQ(back.tool_calls, filled().tool_calls);
  RequestRecord none = filled();
  none.tool_calls.clear();
  EXPECT_FALSE(to_json(none).contains("tool_calls")) << "written only when there is a call";
}

TEST(RequestRecord, RecordsOfOlderBundlesLoadWithoutTheNewerFields) {
  nlohmann::json j = to_json(filled());
  j.erase("client_thread_cpu_s");
  j.erase("events_per_read");
  j.erase("tool_calls");
  const RequestRecord back = record_from_json(j);
  EXPECT_TRUE(back.tool_calls.empty());
  EXPECT_EQ(back.client_thread_cpu_s, 0);
  EXPECT_TRUE(back.events_per_read.empty());
}

void expect_error_naming(const nlohmann::json& j, const std::string& field) {
  try {
    record_from_json(j);
    ADD_FAILURE() << "accepted a record with a bad `" << field << "`";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("`" + field + "`"), std::string::npos) << e.what();
  }
}

TEST(RequestRecord, BadFieldsAreNamed) {
  const nlohmann::json good = to_json(filled());
  nlohmann::json j = good;
  j.erase("end_s");
  expect_error_naming(j, "end_s");
  j = good;
  j["ok"] = 1;
  expect_error_naming(j, "ok");
  j = good;
  j["token_ids"] = {1, -2};
  expect_error_naming(j, "token_ids");
  j = good;
  j["output_event_s"] = {0.1, "late"};
  expect_error_naming(j, "output_event_s");
  j = good;
  j["first_output_s"] = "0.3";
  expect_error_naming(j, "first_output_s");
  j = good;
  j["events_per_read"] = {1, -1};
  expect_error_naming(j, "events_per_read");
  j = good;
  j["client_thread_cpu_s"] = "fast";
  expect_error_naming(j, "client_thread_cpu_s");
  j = good;
  j["ttft"] = 0.1;
  expect_error_naming(j, "ttft");
  j = good;
  j["tool_calls"] = {{{"name", "f"}}};
  expect_error_naming(j, "tool_calls");
  j = good;
  j["tool_calls"] = {{{"name", "f"}, {"arguments", nlohmann::json::object()}}};
  expect_error_naming(j, "tool_calls");
  EXPECT_THROW(record_from_json(nlohmann::json::array()), Error);
}

// 2^64 - 1 is an unsigned JSON integer that reads back as -1 through int64_t; a negative count of
// tokens or a negative HTTP status is no observation either.
TEST(RequestRecord, CountsThatWrapOrAreNegativeAreNamed) {
  const nlohmann::json good = to_json(filled());
  for (const char* field : {"prompt_tokens", "completion_tokens", "cached_tokens",
                            "reasoning_tokens", "http_status", "index", "repetition"}) {
    SCOPED_TRACE(field);
    nlohmann::json j = good;
    j[field] = 18446744073709551615ull;
    expect_error_naming(j, field);
    j[field] = 2147483648ull;
    expect_error_naming(j, field);
  }
  for (const char* field :
       {"prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens", "http_status"}) {
    SCOPED_TRACE(field);
    nlohmann::json j = good;
    j[field] = -13;
    expect_error_naming(j, field);
  }
  nlohmann::json warmup = good;
  warmup["repetition"] = -2;  // warmups are numbered below zero
  EXPECT_EQ(record_from_json(warmup).repetition, -2);
}

}  // namespace
}  // namespace sparkglm::harness
