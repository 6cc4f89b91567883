#pragma once
// The pushdown automaton over a Grammar (grammar.h), one byte at a time. A Stack holds one Frame
// per open value, the root at index 0; the top frame consumes the next byte, pushing a child frame
// when a value starts (its kChoice alternatives fork into separate stacks), and a top frame that
// may end here also pops, handing the byte to its parent. A matcher keeps a small set of stacks
// (the live alternatives), each bounded by GrammarLimits::max_stack_depth frames.
//
// A Frame is a few integers, its whole state: equal frames behave identically, which is what the
// token-mask cache keys on (token_mask_cache.h). Counters a node does not constrain stay 0 (a
// string's length when unbounded, a number's magnitude when unbounded), so such frames repeat.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <tuple>
#include <vector>

#include "engine/text/grammar/grammar.h"

namespace sparkglm::grammar {

struct Frame {
  int32_t node = 0;
  int32_t state = 0;  // the node kind's phase
  int64_t a = 0;      // string: code points; number: |integer part|; object: next property;
                      // array: items
  int64_t b = 0;      // number: fraction digits as an integer
  int32_t c = 0;      // number: digit counts (int | frac << 8 | exp << 16); object: property
  int32_t d = 0;      // whitespace bytes at the current gap; number: 1 when negative

  bool operator==(const Frame& o) const {
    return node == o.node && state == o.state && a == o.a && b == o.b && c == o.c && d == o.d;
  }
  bool operator<(const Frame& o) const {
    return std::tie(node, state, a, b, c, d) < std::tie(o.node, o.state, o.a, o.b, o.c, o.d);
  }
};

struct FrameHash {
  size_t operator()(const Frame& f) const;
};

using Stack = std::vector<Frame>;

// A non-integer kNumber has at most kNumberDigits integer digits; a bounded one at most kFracDigits
// fraction digits and no exponent (number_automaton.cpp).
constexpr int kNumberDigits = 15, kFracDigits = 12;
// A bounded non-integer kNumber's bounds are narrowed, at compile time, to the nearest values
// so written and made inclusive: every frame the automaton then finds feasible can be completed
// within them (a bound between two such values would admit "0.000000000000" for (0, 1e-12] and
// leave no digit to follow). False when no such value lies between the bounds.
bool snap_number_bounds(Node& n);

class ByteAutomaton {
 public:
  explicit ByteAutomaton(const Grammar& g) : g_(g) {}

  Stack initial() const { return Stack{Frame{g_.root}}; }
  // Appends to `out` every stack `s` becomes by consuming `byte` (none: the byte is rejected).
  void advance(const Stack& s, uint8_t byte, std::vector<Stack>& out) const;
  // The value can end here: every open frame from the top down is complete.
  bool can_finish(const Stack& s) const;
  // With s[0] standing for a frame of a longer stack: frames from the top down to s[0] can all
  // end here, so s[0]'s parent would take the next byte.
  bool bottom_can_pop(const Stack& s) const;
  // Pops top frames that are complete and can take no further byte (a closed string or object),
  // so the top frame is the one the next byte goes to.
  void normalize(Stack& s) const;
  // After the top frame of `s` is removed: tells the new top that its child value ended.
  void child_done(Frame& parent) const;

  const Grammar& grammar() const { return g_; }

 private:
  void consume(const Stack& s, uint8_t byte, std::vector<Stack>& out) const;
  void push_value(const Stack& s, int32_t node, uint8_t byte, std::vector<Stack>& out,
                  int depth = 0) const;
  bool final(const Frame& f) const;
  bool accepts_more(const Frame& f) const;
  bool whitespace(Frame& f, uint8_t byte) const;  // consumes a bounded whitespace byte
  bool string_byte(const Node& n, Frame& f, uint8_t byte) const;
  bool number_byte(const Node& n, Frame& f, uint8_t byte) const;
  bool number_feasible(const Node& n, const Frame& f) const;
  bool number_in_bounds(const Node& n, const Frame& f) const;

  const Grammar& g_;
};

}  // namespace sparkglm::grammar
