#pragma once
// When a workload's requests are sent (QUALIFICATION.md, "Workloads"): a closed loop at concurrency
// C, staggered offsets, Poisson or gamma arrivals from a seed, or a barrier start. Open-loop
// schedules become send offsets here; the load runner keeps the closed loop and the barrier.
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace sparkglm::harness {

struct ArrivalSchedule {
  enum class Kind { kClosedLoop, kStaggered, kPoisson, kGamma, kBarrier };
  Kind kind = Kind::kClosedLoop;
  int32_t concurrency = 1;  // closed loop: requests kept in flight; barrier: released together
  double stagger_s = 0;     // staggered: request i is sent at i * stagger_s
  double rate_per_s = 1;    // Poisson/gamma: mean arrival rate
  double gamma_shape = 1;   // gamma: shape k of the inter-arrival distribution (k=1 is Poisson)
  uint64_t seed = 0;        // Poisson/gamma: the generator seed (see arrival_offsets)
};

const char* to_string(ArrivalSchedule::Kind kind);  // "closed" / "staggered" / ... (the JSON type)

// {"type": "closed", "concurrency": 4}, {"type": "staggered", "stagger_s": 0.25},
// {"type": "poisson", "rate_per_s": 2, "seed": 7}, {"type": "gamma", "rate_per_s": 2,
// "gamma_shape": 0.5, "seed": 7}, {"type": "barrier", "concurrency": 4}. Unknown keys and
// out-of-range values throw Error(kInvalidConfig) naming the field.
ArrivalSchedule arrival_from_json(const nlohmann::json& j);
nlohmann::json to_json(const ArrivalSchedule& s);  // only the fields its kind uses

// Send offsets in seconds for n requests, request 0 at 0. Closed loop and barrier: all 0.
// Staggered: i * stagger_s. Poisson and gamma: offset[i] = offset[i-1] + gap_i, gaps drawn in
// order from one SplitMix64(seed) (harness/statistics.h), each 64-bit draw x read as the uniform
// u = ((x >> 11) + 0.5) / 2^53 in (0, 1). A Poisson gap is -ln(u) / rate. A gamma gap is
// Gamma(k, 1) / (k * rate) (mean 1 / rate, coefficient of variation 1 / sqrt(k)), with Gamma(k, 1)
// drawn by Marsaglia and Tsang's method (2000): d = k - 1/3, c = 1 / sqrt(9 d); repeat
// {draw u1, u2; z = sqrt(-2 ln u1) cos(2 pi u2); if 1 + c z <= 0 start over; v = (1 + c z)^3;
// draw u3; accept d v when ln u3 < z^2 / 2 + d - d v + d ln v}. For k < 1: the draw for k + 1,
// then one more u, giving that draw times u^(1/k).
std::vector<double> arrival_offsets(const ArrivalSchedule& s, int32_t n);

}  // namespace sparkglm::harness
