#include "engine/text/grammar/byte_automaton.h"

#include <algorithm>

namespace sparkglm::grammar {

namespace {

// Phases of the container frames (kObject, kArray, kRoot).
enum ContainerPhase : int32_t {
  kOpen = 0,         // expects '{' / '[' (kRoot: the leading gap)
  kAfterOpen = 1,    // after '{' / '[': a key / item or the close
  kKeyRunning = 2,   // the key's frame is above
  kBeforeColon = 3,  // after the key
  kBeforeValue = 4,  // after ':'
  kAfterValue = 5,   // after a value: ',' or the close
  kClosed = 6,
  kAfterComma = 8,    // after ',': a key / item, never the close
  kValueRunning = 9,  // the value's frame is above
};
constexpr int32_t kRootRunning = 1, kRootDone = 2;

// Phases of a kString frame; 10.. wait for UTF-8 continuation bytes.
enum StringPhase : int32_t {
  kStrOpen = 0,
  kStrBody = 1,
  kStrEscape = 2,
  kStrHex = 3,  // 3..6: \u hex digits
  kStrClosed = 7,
  kCont1 = 10,   // one continuation byte 80..BF
  kCont2 = 11,   // two
  kCont3 = 12,   // three
  kContE0 = 13,  // A0..BF then one
  kContED = 14,  // 80..9F then one (no surrogates)
  kContF0 = 15,  // 90..BF then two
  kContF4 = 16,  // 80..8F then two (at most U+10FFFF)
};

bool is_ws(uint8_t b) {
  return b == ' ' || b == '\n' || b == '\t' || b == '\r';
}
bool is_hex(uint8_t b) {
  return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F');
}

}  // namespace

size_t FrameHash::operator()(const Frame& f) const {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  auto mix = [&](uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
  };
  mix(uint64_t(uint32_t(f.node)) << 32 | uint32_t(f.state));
  mix(uint64_t(f.a));
  mix(uint64_t(f.b));
  mix(uint64_t(uint32_t(f.c)) << 32 | uint32_t(f.d));
  return size_t(h ^ (h >> 29));
}

bool ByteAutomaton::whitespace(Frame& f, uint8_t byte) const {
  if (!is_ws(byte) || f.d >= g_.limits.max_whitespace) return false;
  ++f.d;
  return true;
}

bool ByteAutomaton::final(const Frame& f) const {
  const Node& n = g_.nodes[size_t(f.node)];
  switch (n.kind) {
    case NodeKind::kLiteral:
      return size_t(f.state) == n.literal.size();
    case NodeKind::kString:
      if (n.raw) return f.state == kStrBody && (n.min_length == 0 || f.a >= n.min_length);
      return f.state == kStrClosed;
    case NodeKind::kNumber:
      return number_in_bounds(n, f);
    case NodeKind::kObject:
    case NodeKind::kArray:
      return f.state == kClosed;
    case NodeKind::kRoot:
      return f.state == kRootDone;
    case NodeKind::kSequence:
      for (size_t i = size_t(f.a); i < n.children.size(); ++i)
        if (!n.optional[i]) return false;
      return true;
    case NodeKind::kChoice:
      break;
  }
  return false;
}

bool ByteAutomaton::accepts_more(const Frame& f) const {
  const Node& n = g_.nodes[size_t(f.node)];
  switch (n.kind) {
    case NodeKind::kLiteral:
      return size_t(f.state) < n.literal.size();
    case NodeKind::kString:
      return f.state != kStrClosed;
    case NodeKind::kNumber:
      return true;  // a complete number may still grow; its parent takes what it cannot
    case NodeKind::kObject:
    case NodeKind::kArray:
      return f.state != kClosed;
    case NodeKind::kRoot:
      return f.state != kRootDone;
    case NodeKind::kSequence:
      return size_t(f.a) < n.children.size();
    case NodeKind::kChoice:
      break;
  }
  return false;
}

void ByteAutomaton::child_done(Frame& p) const {
  const Node& n = g_.nodes[size_t(p.node)];
  p.d = 0;
  if (n.kind == NodeKind::kRoot) {
    p.state = kRootDone;
  } else if (p.state == kKeyRunning) {
    p.state = kBeforeColon;
  } else if (p.state == kValueRunning) {
    p.state = kAfterValue;
  }
}

bool ByteAutomaton::can_finish(const Stack& s) const {
  Stack t = s;
  while (final(t.back())) {
    if (t.size() == 1) return true;
    t.pop_back();
    child_done(t.back());
  }
  return false;
}

bool ByteAutomaton::bottom_can_pop(const Stack& s) const {
  if (g_.nodes[size_t(s.front().node)].kind == NodeKind::kRoot) return false;
  return can_finish(s);
}

void ByteAutomaton::normalize(Stack& s) const {
  while (s.size() > 1 && final(s.back()) && !accepts_more(s.back())) {
    s.pop_back();
    child_done(s.back());
  }
}

void ByteAutomaton::advance(const Stack& s, uint8_t byte, std::vector<Stack>& out) const {
  consume(s, byte, out);
  if (s.size() > 1 && final(s.back())) {
    Stack t(s.begin(), s.end() - 1);
    child_done(t.back());
    advance(t, byte, out);
  }
}

void ByteAutomaton::push_value(const Stack& s, int32_t node, uint8_t byte, std::vector<Stack>& out,
                               int depth) const {
  const Node& n = g_.nodes[size_t(node)];
  if (n.kind == NodeKind::kChoice) {
    // The compiler refused choice cycles, so depth stays below the node count.
    for (int32_t c : n.children) push_value(s, c, byte, out, depth + 1);
    return;
  }
  if (int(s.size()) >= g_.limits.max_stack_depth) return;
  Stack t = s;
  t.push_back(Frame{node});
  consume(t, byte, out);
}

void ByteAutomaton::consume(const Stack& s, uint8_t byte, std::vector<Stack>& out) const {
  Frame f = s.back();
  const Node& n = g_.nodes[size_t(f.node)];
  auto emit = [&](const Frame& nf) {
    out.push_back(s);
    out.back().back() = nf;
  };
  // Replaces the top by `nf` and pushes `child`'s frames, which consume `byte`.
  auto push = [&](const Frame& nf, int32_t child) {
    Stack t = s;
    t.back() = nf;
    push_value(t, child, byte, out);
  };
  switch (n.kind) {
    case NodeKind::kLiteral:
      if (size_t(f.state) < n.literal.size() && uint8_t(n.literal[size_t(f.state)]) == byte) {
        ++f.state;
        emit(f);
      }
      return;
    case NodeKind::kString:
      if (string_byte(n, f, byte)) emit(f);
      return;
    case NodeKind::kNumber:
      if (number_byte(n, f, byte)) emit(f);
      return;
    case NodeKind::kRoot:
      if (f.state != kOpen) return;
      if (n.json && whitespace(f, byte)) return emit(f);
      f.d = 0;
      f.state = kRootRunning;
      return push(f, n.value_node);
    case NodeKind::kSequence:
      // The next child, or a later one when those before it are optional.
      for (size_t j = size_t(f.a); j < n.children.size(); ++j) {
        Frame k = f;
        k.a = int64_t(j) + 1;
        push(k, n.children[j]);
        if (!n.optional[j]) break;
      }
      return;
    case NodeKind::kChoice:
      return;
    case NodeKind::kObject:
    case NodeKind::kArray:
      break;
  }
  const bool object = n.kind == NodeKind::kObject;
  const int64_t props = int64_t(n.properties.size());
  // Declared properties from index i on: the close is allowed when none of them is required.
  auto may_close = [&](int64_t i) {
    if (!object || n.free_keys) return true;
    for (; i < props; ++i)
      if (n.properties[size_t(i)].required) return false;
    return true;
  };
  const bool counted = n.min_items > 0 || n.max_items >= 0;
  const uint8_t open = object ? '{' : '[', close = object ? '}' : ']';
  switch (f.state) {
    case kOpen:
      if (byte == open) {
        f.state = kAfterOpen;
        emit(f);
      }
      return;
    case kAfterOpen:
    case kAfterComma:
    case kBeforeValue:
      if (whitespace(f, byte)) return emit(f);
      f.d = 0;
      if (f.state == kAfterOpen && byte == close && (object ? may_close(0) : n.min_items == 0)) {
        f.state = kClosed;
        return emit(f);
      }
      if (!object || f.state == kBeforeValue) {
        int32_t child = n.value_node;
        if (object && !n.free_keys) child = n.properties[size_t(f.c)].value_node;
        if (!object && n.max_items >= 0 && f.a >= n.max_items) return;
        if (!object && counted) ++f.a;
        f.state = kValueRunning;
        return push(f, child);
      }
      if (byte != '"') return;
      f.state = kKeyRunning;
      if (n.free_keys) return push(f, n.key_node);
      // The next key is any declared one up to and including the next required one.
      for (int64_t j = f.a; j < props; ++j) {
        Frame k = f;
        k.a = j + 1;
        k.c = int32_t(j);
        push(k, n.properties[size_t(j)].key_node);
        if (n.properties[size_t(j)].required) break;
      }
      return;
    case kBeforeColon:
      if (whitespace(f, byte)) return emit(f);
      if (byte == ':') {
        f.d = 0;
        f.state = kBeforeValue;
        emit(f);
      }
      return;
    case kAfterValue:
      if (whitespace(f, byte)) return emit(f);
      f.d = 0;
      if (byte == ',') {
        const bool more =
            object ? (n.free_keys || f.a < props) : (n.max_items < 0 || f.a < n.max_items);
        if (more) {
          f.state = kAfterComma;
          emit(f);
        }
      } else if (byte == close && (object ? may_close(f.a) : f.a >= n.min_items)) {
        f.state = kClosed;
        emit(f);
      }
      return;
    default:
      return;
  }
}

bool ByteAutomaton::string_byte(const Node& n, Frame& f, uint8_t b) const {
  const bool counted = n.min_length > 0 || n.max_length >= 0;
  // A new code point starts: within maxLength?
  auto start_char = [&]() {
    if (!counted) return true;
    if (n.max_length >= 0 && f.a >= n.max_length) return false;
    ++f.a;
    return true;
  };
  auto cont = [&](uint8_t lo, uint8_t hi, int32_t next) {
    if (b < lo || b > hi) return false;
    f.state = next;
    return true;
  };
  if (n.raw && f.state == kStrOpen) f.state = kStrBody;  // no quotes: the body from the start
  if (n.raw && f.state == kStrBody && b < 0x80) return start_char();
  switch (f.state) {
    case kStrOpen:
      if (b != '"') return false;
      f.state = kStrBody;
      return true;
    case kStrBody:
      if (b == '"') {
        if (counted && f.a < n.min_length) return false;
        f.state = kStrClosed;
        return true;
      }
      if (b < 0x20) return false;
      if (b == '\\') return start_char() && (f.state = kStrEscape, true);
      if (b < 0x80) return start_char();
      if (b >= 0xC2 && b <= 0xDF) return start_char() && (f.state = kCont1, true);
      if (b == 0xE0) return start_char() && (f.state = kContE0, true);
      if (b == 0xED) return start_char() && (f.state = kContED, true);
      if (b >= 0xE1 && b <= 0xEF) return start_char() && (f.state = kCont2, true);
      if (b == 0xF0) return start_char() && (f.state = kContF0, true);
      if (b >= 0xF1 && b <= 0xF3) return start_char() && (f.state = kCont3, true);
      if (b == 0xF4) return start_char() && (f.state = kContF4, true);
      return false;
    case kStrEscape:
      if (b == 'u') return f.state = kStrHex, true;
      if (b == '"' || b == '\\' || b == '/' || b == 'b' || b == 'f' || b == 'n' || b == 'r' ||
          b == 't')
        return f.state = kStrBody, true;
      return false;
    case kStrHex:
    case kStrHex + 1:
    case kStrHex + 2:
    case kStrHex + 3:
      if (!is_hex(b)) return false;
      f.state = f.state == kStrHex + 3 ? kStrBody : f.state + 1;
      return true;
    case kCont1:
      return cont(0x80, 0xBF, kStrBody);
    case kCont2:
      return cont(0x80, 0xBF, kCont1);
    case kCont3:
      return cont(0x80, 0xBF, kCont2);
    case kContE0:
      return cont(0xA0, 0xBF, kCont1);
    case kContED:
      return cont(0x80, 0x9F, kCont1);
    case kContF0:
      return cont(0x90, 0xBF, kCont2);
    case kContF4:
      return cont(0x80, 0x8F, kCont2);
    default:
      return false;
  }
}

}  // namespace sparkglm::grammar
