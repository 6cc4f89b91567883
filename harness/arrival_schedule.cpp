#include "harness/arrival_schedule.h"

#include <cmath>
#include <numbers>
#include <set>

#include "engine/core/error.h"
#include "harness/statistics.h"

namespace sparkglm::harness {

using nlohmann::json;

namespace {

using Kind = ArrivalSchedule::Kind;

constexpr Kind kKinds[] = {Kind::kClosedLoop, Kind::kStaggered, Kind::kPoisson, Kind::kGamma,
                           Kind::kBarrier};

[[noreturn]] void bad(const std::string& field, const std::string& expected) {
  throw Error(ErrorKind::kInvalidConfig,
              "arrival schedule field `" + field + "`: expected " + expected);
}

double positive_number(const json& j, const std::string& key, bool zero_ok) {
  if (!j.contains(key))
    bad(key, std::string("present for type \"") + j["type"].get<std::string>() + "\"");
  const json& v = j[key];
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 ||
      (!zero_ok && v.get<double>() == 0))
    bad(key, zero_ok ? "a finite number >= 0" : "a finite number > 0");
  return v.get<double>();
}

// Uniform on (0, 1) from the top 53 bits of one draw: never 0, so ln(u) is finite.
double uniform_open(SplitMix64& g) {
  return (double(g.next() >> 11) + 0.5) * 0x1.0p-53;
}

// Gamma(k, 1) by Marsaglia and Tsang (2000), with its boost for k < 1.
double gamma_unit(SplitMix64& g, double k) {
  if (k < 1) {
    const double x = gamma_unit(g, k + 1);  // drawn before u: the order is part of the contract
    return x * std::pow(uniform_open(g), 1.0 / k);
  }
  const double d = k - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    const double u1 = uniform_open(g);
    const double u2 = uniform_open(g);
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    const double base = 1.0 + c * z;
    if (base <= 0) continue;
    const double v = base * base * base;
    if (std::log(uniform_open(g)) < 0.5 * z * z + d - d * v + d * std::log(v)) return d * v;
  }
}

}  // namespace

const char* to_string(Kind kind) {
  switch (kind) {
    case Kind::kClosedLoop:
      return "closed";
    case Kind::kStaggered:
      return "staggered";
    case Kind::kPoisson:
      return "poisson";
    case Kind::kGamma:
      return "gamma";
    case Kind::kBarrier:
      return "barrier";
  }
  return "?";
}

ArrivalSchedule arrival_from_json(const json& j) {
  if (!j.is_object()) bad("(schedule)", "a JSON object with a \"type\"");
  if (!j.contains("type") || !j["type"].is_string())
    bad("type", "one of \"closed\", \"staggered\", \"poisson\", \"gamma\", \"barrier\"");
  ArrivalSchedule s;
  const std::string type = j["type"].get<std::string>();
  bool known = false;
  for (Kind k : kKinds)
    if (type == to_string(k)) s.kind = k, known = true;
  if (!known)
    bad("type", "one of \"closed\", \"staggered\", \"poisson\", \"gamma\", \"barrier\" (got \"" +
                    type + "\")");
  // Each kind names the fields it reads; any other key is a mistake (a typo would otherwise be a
  // silently different workload).
  std::set<std::string> allowed = {"type"};
  switch (s.kind) {
    case Kind::kClosedLoop:
    case Kind::kBarrier:
      allowed.insert("concurrency");
      break;
    case Kind::kStaggered:
      allowed.insert("stagger_s");
      break;
    case Kind::kGamma:
      allowed.insert("gamma_shape");
      [[fallthrough]];
    case Kind::kPoisson:
      allowed.insert({"rate_per_s", "seed"});
      break;
  }
  for (const auto& [key, value] : j.items())
    if (!allowed.count(key)) bad(key, std::string("absent: type \"") + type + "\" does not use it");

  switch (s.kind) {
    case Kind::kClosedLoop:
    case Kind::kBarrier: {
      if (!j.contains("concurrency")) break;  // 1, one request at a time
      const json& c = j["concurrency"];
      if (!c.is_number_integer() || c.get<int64_t>() < 1 || c.get<int64_t>() > 100000)
        bad("concurrency", "an integer from 1 to 100000");
      s.concurrency = int32_t(c.get<int64_t>());
      break;
    }
    case Kind::kStaggered:
      s.stagger_s = positive_number(j, "stagger_s", true);
      break;
    case Kind::kGamma:
      s.gamma_shape = positive_number(j, "gamma_shape", false);
      [[fallthrough]];
    case Kind::kPoisson: {
      s.rate_per_s = positive_number(j, "rate_per_s", false);
      if (!j.contains("seed")) bad("seed", "present: the generator seed, an unsigned integer");
      const json& seed = j["seed"];
      if (!seed.is_number_integer() || (!seed.is_number_unsigned() && seed.get<int64_t>() < 0))
        bad("seed", "an unsigned 64-bit integer");
      s.seed = j["seed"].get<uint64_t>();
      break;
    }
  }
  return s;
}

json to_json(const ArrivalSchedule& s) {
  json j = {{"type", to_string(s.kind)}};
  switch (s.kind) {
    case Kind::kClosedLoop:
    case Kind::kBarrier:
      j["concurrency"] = s.concurrency;
      break;
    case Kind::kStaggered:
      j["stagger_s"] = s.stagger_s;
      break;
    case Kind::kGamma:
      j["gamma_shape"] = s.gamma_shape;
      [[fallthrough]];
    case Kind::kPoisson:
      j["rate_per_s"] = s.rate_per_s;
      j["seed"] = s.seed;
      break;
  }
  return j;
}

std::vector<double> arrival_offsets(const ArrivalSchedule& s, int32_t n) {
  if (n < 0) throw Error(ErrorKind::kInvalidArgument, "arrival_offsets: n must be >= 0");
  std::vector<double> offsets(size_t(n), 0.0);
  if (s.kind == Kind::kStaggered) {
    for (int32_t i = 0; i < n; ++i) offsets[i] = i * s.stagger_s;
  } else if (s.kind == Kind::kPoisson || s.kind == Kind::kGamma) {
    if (!(s.rate_per_s > 0) || !std::isfinite(s.rate_per_s))
      bad("rate_per_s", "a finite number > 0");
    if (s.kind == Kind::kGamma && (!(s.gamma_shape > 0) || !std::isfinite(s.gamma_shape)))
      bad("gamma_shape", "a finite number > 0");
    SplitMix64 g(s.seed);
    for (int32_t i = 1; i < n; ++i) {
      const double gap = s.kind == Kind::kPoisson
                             ? -std::log(uniform_open(g)) / s.rate_per_s
                             : gamma_unit(g, s.gamma_shape) / (s.gamma_shape * s.rate_per_s);
      offsets[i] = offsets[i - 1] + gap;
    }
  }
  return offsets;
}

}  // namespace sparkglm::harness
