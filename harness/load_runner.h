#pragma once
// Sends a list of requests to one server on an arrival schedule and returns one record per
// request, in the order of the specs, failures included: a request that fails is a failed record,
// never a missing one. One thread per in-flight stream, each with its own libcurl handle.
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "harness/arrival_schedule.h"
#include "harness/request_record.h"
#include "harness/request_spec.h"

namespace sparkglm::harness {

using Clock = std::chrono::steady_clock;

// Called once per finished request (never concurrently), with how many are done of how many.
using ProgressCallback =
    std::function<void(const RequestRecord& record, size_t done, size_t total)>;

// Closed loop: `concurrency` workers each take the next spec in order as soon as their previous
// request ends. Barrier: specs in groups of `concurrency`; each group's threads are all created
// and waiting before any sends, then released at once; the next group starts when the whole group
// has ended. Staggered, Poisson, gamma: spec i is sent at its `offset_s` after run_load was
// called (fill the offsets with assign_offsets, so that both arms of an A/B send at the same
// offsets), whatever is still in flight. Times in the records are seconds since `epoch`.
std::vector<RequestRecord> run_load(const std::string& base_url,
                                    const std::vector<RequestSpec>& specs,
                                    const ArrivalSchedule& schedule, const std::string& arm,
                                    Clock::time_point epoch, ProgressCallback progress = {});

// Sets specs[i].offset_s = arrival_offsets(schedule, specs.size())[i].
void assign_offsets(std::vector<RequestSpec>& specs, const ArrivalSchedule& schedule);

}  // namespace sparkglm::harness
