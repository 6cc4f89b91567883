// run_load against a real tinyglm-micro server: one record per spec, in spec order, failures
// included, with the closed loop never exceeding its concurrency.
#include "harness/load_runner.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "local_endpoints.h"

namespace sparkglm::harness {
namespace {

using nlohmann::json;

std::vector<RequestSpec> completion_specs(int n, int max_tokens) {
  std::vector<RequestSpec> specs;
  for (int i = 0; i < n; ++i) {
    RequestSpec s;
    s.workload = "load-test";
    s.case_id = "load";
    s.index = i;
    s.marker = "[m" + std::to_string(i) + "]";
    s.path = "/v1/completions";
    s.body = {{"prompt", "request " + std::to_string(i) + " " + s.marker},
              {"max_tokens", max_tokens},
              {"ignore_eos", true}};
    s.timeout_s = 120;
    specs.push_back(std::move(s));
  }
  return specs;
}

// The most requests in flight at once, from the records' own start and end times.
int max_in_flight(const std::vector<RequestRecord>& records) {
  int most = 0;
  for (const RequestRecord& a : records) {
    int n = 0;
    for (const RequestRecord& b : records) n += b.start_s <= a.start_s && a.start_s < b.end_s;
    most = std::max(most, n);
  }
  return most;
}

TEST(LoadRunner, ClosedLoopAtConcurrencyFourGivesEightOrderedRecords) {
  auto server = testing::start_tiny_server();
  ArrivalSchedule closed;
  closed.concurrency = 4;
  std::vector<size_t> progress;
  const std::vector<RequestRecord> records =
      run_load(server->base_url(), completion_specs(8, 32), closed, "baseline", Clock::now(),
               [&](const RequestRecord&, size_t done, size_t total) {
                 EXPECT_EQ(total, 8u);
                 progress.push_back(done);
               });
  ASSERT_EQ(records.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(records[i].index, i);
    EXPECT_EQ(records[i].marker, "[m" + std::to_string(i) + "]");
    EXPECT_EQ(records[i].arm, "baseline");
    EXPECT_TRUE(records[i].ok) << records[i].error;
    EXPECT_EQ(records[i].completion_tokens, 32);
  }
  EXPECT_LE(max_in_flight(records), 4);
  EXPECT_EQ(progress, (std::vector<size_t>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(LoadRunner, FailuresAreRecordedInPlace) {
  auto server = testing::start_tiny_server();
  std::vector<RequestSpec> specs = completion_specs(5, 8);
  specs[2].body["max_tokens"] = -1;  // HTTP 400
  specs[4].body = json::array();     // not an object: refused before sending
  ArrivalSchedule closed;
  closed.concurrency = 2;
  const std::vector<RequestRecord> records =
      run_load(server->base_url(), specs, closed, "", Clock::now());
  ASSERT_EQ(records.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(records[i].index, i);
    EXPECT_EQ(records[i].ok, i != 2 && i != 4) << i << ": " << records[i].error;
  }
  EXPECT_EQ(records[2].http_status, 400);
  EXPECT_NE(records[4].error.find("body"), std::string::npos) << records[4].error;
  for (const RequestRecord& r : records) EXPECT_EQ(r.workload, "load-test");
}

TEST(LoadRunner, BarrierReleasesEachGroupTogether) {
  auto server = testing::start_tiny_server();
  ArrivalSchedule barrier;
  barrier.kind = ArrivalSchedule::Kind::kBarrier;
  barrier.concurrency = 3;
  const std::vector<RequestRecord> records =
      run_load(server->base_url(), completion_specs(5, 8), barrier, "", Clock::now());
  ASSERT_EQ(records.size(), 5u);
  for (const RequestRecord& r : records) EXPECT_TRUE(r.ok) << r.error;
  // The second group (requests 3 and 4) starts only after the whole first group ended.
  const double first_group_end = std::max({records[0].end_s, records[1].end_s, records[2].end_s});
  EXPECT_GE(records[3].start_s, first_group_end);
  EXPECT_GE(records[4].start_s, first_group_end);
}

TEST(LoadRunner, StaggeredRequestsWaitForTheirOffsets) {
  auto server = testing::start_tiny_server();
  ArrivalSchedule staggered;
  staggered.kind = ArrivalSchedule::Kind::kStaggered;
  staggered.stagger_s = 0.2;
  std::vector<RequestSpec> specs = completion_specs(3, 8);
  assign_offsets(specs, staggered);
  EXPECT_EQ(specs[2].offset_s, 0.4);
  const auto epoch = Clock::now();
  const std::vector<RequestRecord> records =
      run_load(server->base_url(), specs, staggered, "", epoch);
  ASSERT_EQ(records.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(records[i].ok) << records[i].error;
    EXPECT_GE(records[i].start_s, specs[i].offset_s);  // never early; late is the machine's noise
  }
}

TEST(LoadRunner, PoissonOffsetsComeFromTheSchedule) {
  ArrivalSchedule p;
  p.kind = ArrivalSchedule::Kind::kPoisson;
  p.rate_per_s = 3;
  p.seed = 5;
  std::vector<RequestSpec> specs = completion_specs(6, 1);
  assign_offsets(specs, p);
  const std::vector<double> offsets = arrival_offsets(p, 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(specs[i].offset_s, offsets[i]);
}

}  // namespace
}  // namespace sparkglm::harness
