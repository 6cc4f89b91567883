// The kNumber frame of ByteAutomaton: JSON's number syntax with digit caps, and bounds kept by
// refusing any digit after which no value within the bounds can be reached.
#include <algorithm>
#include <cmath>
#include <optional>

#include "engine/text/grammar/byte_automaton.h"

namespace sparkglm::grammar {

namespace {

enum NumberPhase : int32_t {
  kStart = 0,
  kMinus = 1,
  kZero = 2,  // a leading 0: no more integer digits
  kInt = 3,
  kDot = 4,
  kFrac = 5,
  kE = 6,
  kESign = 7,
  kExp = 8,
};
// Digit caps keep frames finite and values exact: 18 integer digits fit int64 (kNumberDigits and
// kFracDigits: byte_automaton.h).
constexpr int kIntegerDigits = 18, kExpDigits = 3;

int int_digits(const Frame& f) {
  return f.c & 0xff;
}
int frac_digits(const Frame& f) {
  return (f.c >> 8) & 0xff;
}
int exp_digits(const Frame& f) {
  return (f.c >> 16) & 0xff;
}
bool bounded(const Node& n) {
  return n.has_min || n.has_max;
}

int64_t pow10i(int k) {
  int64_t p = 1;
  while (k-- > 0) p *= 10;
  return p;
}

// A magnitude a bounded number can be written with: integer part `a` below 10^kNumberDigits and
// fraction `b` in units of 10^-kFracDigits, valued as number_in_bounds values it (a quotient of
// exact integers is correctly rounded, so b / 10^k gives one double for any digit count k).
double magnitude(int64_t a, int64_t b) {
  return double(a) + double(b) / double(pow10i(kFracDigits));
}

// The smallest i in [lo, hi] with pred(i), or hi + 1; pred is false up to some i, then true.
template <class Pred>
int64_t first_true(int64_t lo, int64_t hi, Pred pred) {
  while (lo <= hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (pred(mid))
      hi = mid - 1;
    else
      lo = mid + 1;
  }
  return lo;
}

// The smallest written value >= m (> m when `exclusive`); nullopt when none is. Values below
// 10^kNumberDigits only: the kInt frame's range stops there.
std::optional<double> lowest_written_at_least(double m, bool exclusive) {
  const int64_t kUnits = pow10i(kFracDigits), kInts = pow10i(kNumberDigits);
  const double top = std::nextafter(double(kInts), 0.0);  // the largest written value
  if (m < 0 || (m == 0 && !exclusive)) {
    // A negative value: the largest magnitude <= -m (< -m when exclusive), 0 at least.
    const double x = std::min(exclusive ? std::nextafter(-m, 0.0) : -m, top);
    const int64_t a = first_true(0, kInts - 1, [&](int64_t i) { return magnitude(i, 0) > x; }) - 1;
    const int64_t b = first_true(0, kUnits - 1, [&](int64_t i) { return magnitude(a, i) > x; }) - 1;
    return -magnitude(a, b);
  }
  const double x = exclusive ? std::nextafter(m, HUGE_VAL) : m;
  if (x > top) return std::nullopt;
  const int64_t a =
      first_true(0, kInts - 1, [&](int64_t i) { return magnitude(i, kUnits - 1) >= x; });
  if (a == kInts) return std::nullopt;
  const int64_t b = first_true(0, kUnits - 1, [&](int64_t i) { return magnitude(a, i) >= x; });
  return magnitude(a, b);
}

}  // namespace

bool snap_number_bounds(Node& n) {
  if (n.has_min) {
    const std::optional<double> lo = lowest_written_at_least(n.min, n.exclusive_min);
    if (!lo) return false;
    n.min = *lo;
    n.exclusive_min = false;
  }
  if (n.has_max) {  // the mirror image: the largest written value <= max
    const std::optional<double> neg = lowest_written_at_least(-n.max, n.exclusive_max);
    if (!neg) return false;
    n.max = -*neg;
    n.exclusive_max = false;
  }
  return !(n.has_min && n.has_max && n.min > n.max);
}

bool ByteAutomaton::number_byte(const Node& n, Frame& f, uint8_t b) const {
  Frame g = f;
  const bool digit = b >= '0' && b <= '9';
  const int v = b - '0';
  const bool bound = bounded(n);
  const int int_cap = n.integer ? kIntegerDigits : kNumberDigits;
  auto first_digit = [&]() {
    g.state = v == 0 ? kZero : kInt;
    g.c = 1;
    if (bound) g.a = v;
  };
  auto fraction_or_exponent = [&]() {
    if (n.integer) return false;
    if (b == '.') return g.state = kDot, true;
    if ((b == 'e' || b == 'E') && !bound) return g.state = kE, true;
    return false;
  };
  switch (f.state) {
    case kStart:
      if (b == '-') {
        g.state = kMinus;
        g.d = 1;
      } else if (digit) {
        first_digit();
      } else {
        return false;
      }
      break;
    case kMinus:
      if (!digit) return false;
      first_digit();
      break;
    case kZero:
      if (!fraction_or_exponent()) return false;
      break;
    case kInt:
      if (digit) {
        if (int_digits(f) >= int_cap) return false;
        g.c = f.c + 1;
        if (bound) g.a = f.a * 10 + v;
      } else if (!fraction_or_exponent()) {
        return false;
      }
      break;
    case kDot:
      if (!digit) return false;
      g.state = kFrac;
      g.c = f.c + (1 << 8);
      if (bound) g.b = v;
      break;
    case kFrac:
      if (digit) {
        if (frac_digits(f) >= (bound ? kFracDigits : kNumberDigits)) return false;
        g.c = f.c + (1 << 8);
        if (bound) g.b = f.b * 10 + v;
      } else if (!((b == 'e' || b == 'E') && !bound && (g.state = kE, true))) {
        return false;
      }
      break;
    case kE:
      if (b == '+' || b == '-') {
        g.state = kESign;
        break;
      }
      [[fallthrough]];
    case kESign:
    case kExp:
      if (!digit || exp_digits(f) >= kExpDigits) return false;
      g.state = kExp;
      g.c = f.c + (1 << 16);
      break;
    default:
      return false;
  }
  if (bound && !number_feasible(n, g)) return false;
  f = g;
  return true;
}

bool ByteAutomaton::number_in_bounds(const Node& n, const Frame& f) const {
  if (f.state != kZero && f.state != kInt && f.state != kFrac && f.state != kExp) return false;
  if (!bounded(n)) return true;
  if (n.integer) {
    const int64_t x = f.d ? -f.a : f.a;
    return x >= n.imin && x <= n.imax;
  }
  double x = double(f.a) + double(f.b) / double(pow10i(frac_digits(f)));
  if (f.d) x = -x;
  if (n.has_min && (x < n.min || (x == n.min && n.exclusive_min))) return false;
  if (n.has_max && (x > n.max || (x == n.max && n.exclusive_max))) return false;
  return true;
}

bool ByteAutomaton::number_feasible(const Node& n, const Frame& f) const {
  const bool neg = f.d != 0;
  if (n.integer) {
    // Values reachable from here: the digits so far followed by k more digits.
    auto overlaps = [&](int64_t lo, int64_t hi) {
      if (neg) std::swap(lo, hi), lo = -lo, hi = -hi;
      return lo <= n.imax && hi >= n.imin;
    };
    if (f.state == kMinus) return n.imin <= 0;
    if (f.state == kZero) return overlaps(0, 0);
    for (int k = 0; k + int_digits(f) <= kIntegerDigits; ++k) {
      const int64_t p = pow10i(k);
      if (overlaps(f.a * p, f.a * p + p - 1)) return true;
    }
    return false;
  }
  // The set [lo, hi] (ends open or not) meets the bounds.
  auto meets = [&](double lo, bool lo_open, double hi, bool hi_open) {
    if (n.has_min && (n.min > lo || (n.min == lo && n.exclusive_min))) {
      lo = n.min;
      lo_open = n.exclusive_min;
    }
    if (n.has_max && (n.max < hi || (n.max == hi && n.exclusive_max))) {
      hi = n.max;
      hi_open = n.exclusive_max;
    }
    return lo < hi || (lo == hi && !lo_open && !hi_open);
  };
  // Magnitudes in [from, to): the value is in [from, to) or, negative, in (-to, -from].
  auto reachable = [&](double from, double to) {
    return neg ? meets(-to, true, -from, false) : meets(from, false, to, true);
  };
  const double a = double(f.a);
  switch (f.state) {
    case kMinus:
      return meets(-std::pow(10.0, kNumberDigits), false, 0.0, false);
    case kZero:
      return reachable(0.0, 1.0);
    case kInt:
      for (int k = 0; k + int_digits(f) <= kNumberDigits; ++k) {
        const double p = std::pow(10.0, k);
        if (reachable(a * p, (a + 1) * p)) return true;
      }
      return false;
    case kDot:
      return reachable(a, a + 1);
    case kFrac: {
      const double scale = double(pow10i(frac_digits(f)));
      return reachable(a + double(f.b) / scale, a + double(f.b + 1) / scale);
    }
    default:
      return true;
  }
}

}  // namespace sparkglm::grammar
