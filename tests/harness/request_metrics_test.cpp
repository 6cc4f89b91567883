// QUALIFICATION.md's metric definitions on hand-made records whose answers are worked out by hand.
#include "harness/request_metrics.h"

#include <gtest/gtest.h>

namespace sparkglm::harness {
namespace {

// Start at 10 s; output events at 10.5 s, then gaps of 1, 2, ..., 20 ms (in that order); end 50 ms
// after the last event. 21 events, 21 tokens, 100 prompt tokens; content from the third event.
RequestRecord worked_example() {
  RequestRecord r;
  r.ok = true;
  r.start_s = 10.0;
  double t = 10.5;
  r.output_event_s.push_back(t);
  for (int ms = 1; ms <= 20; ++ms) r.output_event_s.push_back(t += ms / 1000.0);
  r.first_output_s = 10.5;
  r.first_visible_s = r.output_event_s[2];
  r.end_s = r.output_event_s.back() + 0.05;
  r.completion_tokens = 21;
  r.prompt_tokens = 100;
  return r;
}

TEST(RequestMetrics, WorkedExample) {
  const RequestRecord r = worked_example();
  const RequestMetrics m = request_metrics(r);
  // The events span 1 + 2 + ... + 20 = 210 ms.
  ASSERT_TRUE(m.ttft_s && m.ttfv_s && m.latency_s && m.decode_tok_s && m.tpot_s &&
              m.prefill_tok_s && m.sse_gap_p95_s && m.sse_gap_max_s);
  EXPECT_NEAR(*m.ttft_s, 0.5, 1e-12);
  EXPECT_NEAR(*m.ttfv_s, 0.503, 1e-12);
  EXPECT_NEAR(*m.latency_s, 0.5 + 0.210 + 0.05, 1e-12);
  EXPECT_NEAR(*m.decode_tok_s, 20 / 0.210, 1e-9);
  EXPECT_NEAR(*m.tpot_s, (0.210 + 0.05) / 20, 1e-12);
  EXPECT_NEAR(*m.prefill_tok_s, 100 / 0.5, 1e-9);
  ASSERT_EQ(m.itl_s.size(), 20u);
  EXPECT_NEAR(m.itl_s[0], 0.001, 1e-12);
  EXPECT_NEAR(m.itl_s[19], 0.020, 1e-12);
  // Nearest rank: p95 of 20 values is rank ceil(19) = 19, the 19 ms gap; the max is 20 ms.
  EXPECT_NEAR(*m.sse_gap_p95_s, 0.019, 1e-12);
  EXPECT_NEAR(*m.sse_gap_max_s, 0.020, 1e-12);
}

TEST(RequestMetrics, FailedRecordHasNoMetrics) {
  RequestRecord r = worked_example();
  r.ok = false;
  const RequestMetrics m = request_metrics(r);
  EXPECT_FALSE(m.ttft_s || m.latency_s || m.decode_tok_s || m.tpot_s || m.sse_gap_max_s);
  EXPECT_TRUE(m.itl_s.empty());
  EXPECT_TRUE(pooled_itl_s({r}).empty());
}

TEST(RequestMetrics, OneTokenHasTtftButNoDecodeRate) {
  RequestRecord r;
  r.ok = true;
  r.start_s = 1.0;
  r.first_output_s = 1.25;
  r.output_event_s = {1.25};
  r.end_s = 1.3;
  r.completion_tokens = 1;
  r.prompt_tokens = 50;
  const RequestMetrics m = request_metrics(r);
  EXPECT_NEAR(m.ttft_s.value(), 0.25, 1e-12);
  EXPECT_NEAR(m.prefill_tok_s.value(), 200, 1e-9);
  EXPECT_FALSE(m.ttfv_s);  // only reasoning came
  EXPECT_FALSE(m.decode_tok_s);
  EXPECT_FALSE(m.tpot_s);
  EXPECT_FALSE(m.sse_gap_p95_s);
}

RequestRecord span(double first_output, double end, int32_t tokens) {
  RequestRecord r;
  r.ok = true;
  r.start_s = first_output - 0.5;
  r.first_output_s = first_output;
  r.output_event_s = {first_output, end - 0.01};
  r.end_s = end;
  r.completion_tokens = tokens;
  return r;
}

TEST(RequestMetrics, OutputThroughputSpansTheGroupFromTheFirstStart) {
  // 11 + 21 tokens from the first start (0.5 s: prefill and queueing included) to the last end
  // (4.0 s); not a decode rate, so every token counts and the window opens at the send.
  EXPECT_NEAR(output_throughput_tok_s({span(1.0, 3.0, 11), span(1.5, 4.0, 21)}).value(), 32 / 3.5,
              1e-12);
}

TEST(RequestMetrics, OutputThroughputOfAGroupWithAFailureIsAbsent) {
  RequestRecord failed = span(1.5, 4.0, 21);
  failed.ok = false;
  EXPECT_FALSE(output_throughput_tok_s({span(1.0, 3.0, 11), failed}));
  EXPECT_FALSE(output_throughput_tok_s({}));
}

TEST(RequestMetrics, DeliveryCountsOutputEventsPerReadOfOkRecords) {
  RequestRecord steady = span(1.0, 2.0, 3);
  steady.events_per_read = std::vector<int32_t>(99, 1);
  steady.events_per_read.push_back(0);  // the usage chunk and [DONE]
  EXPECT_EQ(delivery_summary({steady}).reads, 99);
  EXPECT_EQ(delivery_summary({steady}).p99_events_per_read, 1);
  EXPECT_FALSE(delivery_summary({steady}).bursty());

  // 40 events in 10 reads, one of 11: the second-largest read sets p99 of 10 reads (rank 10).
  RequestRecord burst = span(1.0, 2.0, 40);
  burst.events_per_read = {11, 3, 3, 3, 3, 3, 4, 4, 3, 3};
  const DeliverySummary d = delivery_summary({steady, burst});
  EXPECT_EQ(d.reads, 109);
  EXPECT_EQ(d.events, 99 + 40);
  EXPECT_EQ(d.max_events_per_read, 11);
  EXPECT_GT(d.p99_events_per_read, 1);
  EXPECT_TRUE(d.bursty());

  burst.ok = false;  // a failed record's reads count for nothing
  EXPECT_FALSE(delivery_summary({steady, burst}).bursty());
}

TEST(RequestMetrics, ThreadCpuPerOutputEvent) {
  RequestRecord r = span(1.0, 2.0, 4);
  r.output_event_s = {1.0, 1.1, 1.2, 1.3};
  r.client_thread_cpu_s = 0.0002;
  RequestRecord old = r;  // a record written before client_thread_cpu_s existed
  old.client_thread_cpu_s = 0;
  const std::vector<double> v = thread_cpu_per_event_s({r, old});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NEAR(v[0], 0.00005, 1e-15);
}

TEST(RequestMetrics, PooledItlConcatenatesOkRecordsInOrder) {
  RequestRecord a = span(1.0, 1.5, 3);
  a.output_event_s = {1.0, 1.1, 1.3};
  RequestRecord b = span(2.0, 2.5, 2);
  b.output_event_s = {2.0, 2.4};
  const std::vector<double> gaps = pooled_itl_s({a, b});
  ASSERT_EQ(gaps.size(), 3u);
  EXPECT_NEAR(gaps[0], 0.1, 1e-12);
  EXPECT_NEAR(gaps[1], 0.2, 1e-12);
  EXPECT_NEAR(gaps[2], 0.4, 1e-12);
}

TEST(RequestMetrics, ClientOverheadAgainstTheMedianItl) {
  RequestRecord a = span(1.0, 1.5, 3);
  a.output_event_s = {1.0, 1.1, 1.3};  // gaps 0.1, 0.2
  a.client_overhead_median_s = 0.002;
  RequestRecord b = span(2.0, 2.5, 2);
  b.output_event_s = {2.0, 2.4};  // gap 0.4
  b.client_overhead_median_s = 0.004;
  RequestRecord failed = b;
  failed.ok = false;
  failed.client_overhead_median_s = 1;  // a failed record's numbers count for nothing
  // The largest median overhead (4 ms) over the median pooled gap (0.2 s).
  EXPECT_NEAR(client_overhead_to_itl({a, b, failed}).value(), 0.02, 1e-12);
  EXPECT_FALSE(client_overhead_to_itl({failed}));
}

}  // namespace
}  // namespace sparkglm::harness
