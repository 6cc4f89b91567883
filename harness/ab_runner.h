#pragma once
// Runs cases against one or two arms (servers), interleaved: within every repetition each arm
// sends the same requests at the same offsets, one arm after the other, and which arm goes first
// alternates from one repetition to the next, so that drift in the machine lands on both arms
// alike (QUALIFICATION.md, "Statistics and A/B"). Warmups run first, for every arm, and are kept
// in the records (negative repetition numbers); nothing is dropped.
#include <functional>
#include <string>
#include <vector>

#include "harness/arrival_schedule.h"
#include "harness/load_runner.h"
#include "harness/request_record.h"
#include "harness/request_spec.h"

namespace sparkglm::harness {

struct Repetition {
  int32_t number = 0;  // negative: a warmup
  std::vector<RequestSpec> requests;
};

struct CaseLoad {
  std::string label;  // "workload/case", for progress
  ArrivalSchedule arrival;
  std::vector<Repetition> repetitions;  // warmups first, then measured, in run order
};

struct ArmEndpoint {
  std::string label;     // "baseline" / "candidate"
  std::string base_url;  // "http://127.0.0.1:PORT"
};

// Called before each (case, repetition, arm) with what is about to run, and per request done.
struct RunProgress {
  std::function<void(const std::string& label, int32_t repetition, const std::string& arm,
                     size_t requests)>
      begin;
  ProgressCallback request_done;
};

std::vector<RequestRecord> run_interleaved(const std::vector<CaseLoad>& cases,
                                           const std::vector<ArmEndpoint>& arms,
                                           Clock::time_point epoch,
                                           const RunProgress& progress = {});

// The order arms run in for a measured repetition: as given for even numbers, reversed for odd.
std::vector<size_t> arm_order(size_t arms, int32_t repetition);

}  // namespace sparkglm::harness
