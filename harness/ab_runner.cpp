#include "harness/ab_runner.h"

#include <algorithm>
#include <numeric>

namespace sparkglm::harness {

std::vector<size_t> arm_order(size_t arms, int32_t repetition) {
  std::vector<size_t> order(arms);
  std::iota(order.begin(), order.end(), size_t{0});
  if (repetition >= 0 && repetition % 2 == 1) std::reverse(order.begin(), order.end());
  return order;
}

std::vector<RequestRecord> run_interleaved(const std::vector<CaseLoad>& cases,
                                           const std::vector<ArmEndpoint>& arms,
                                           Clock::time_point epoch, const RunProgress& progress) {
  std::vector<RequestRecord> all;
  for (const CaseLoad& c : cases) {
    for (const Repetition& rep : c.repetitions) {
      for (size_t a : arm_order(arms.size(), rep.number)) {
        if (progress.begin) progress.begin(c.label, rep.number, arms[a].label, rep.requests.size());
        std::vector<RequestRecord> records = run_load(arms[a].base_url, rep.requests, c.arrival,
                                                      arms[a].label, epoch, progress.request_done);
        all.insert(all.end(), std::make_move_iterator(records.begin()),
                   std::make_move_iterator(records.end()));
      }
    }
  }
  return all;
}

}  // namespace sparkglm::harness
