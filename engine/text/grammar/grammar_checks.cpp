// Checks over a compiled grammar (schema_compiler.h): oneOf branches must not overlap, no choice
// may reach itself without producing a byte, and every node has a finite value.
#include <set>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/text/grammar/schema_compiler.h"

namespace sparkglm::grammar {

namespace {

// JSON types a node can produce, as a bit set.
enum TypeBit : unsigned { kObj = 1, kArr = 2, kStr = 4, kNum = 8, kBool = 16, kNull = 32 };

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, "response schema " + path + ": " + what);
}

unsigned type_of_literal(const std::string& l) {
  switch (l[0]) {
    case '{':
      return kObj;
    case '[':
      return kArr;
    case '"':
      return kStr;
    case 't':
    case 'f':
      return kBool;
    case 'n':
      return kNull;
    default:
      return kNum;
  }
}

// Types of the node's non-literal values; its literals go to `lits`.
unsigned types_of(const Grammar& g, int32_t id, std::set<std::string>& lits, int depth) {
  const Node& n = g.nodes[size_t(id)];
  if (depth > 64) return ~0u;
  switch (n.kind) {
    case NodeKind::kLiteral:
      lits.insert(n.literal);
      return 0;
    case NodeKind::kString:
      return kStr;
    case NodeKind::kNumber:
      return kNum;
    case NodeKind::kObject:
      return kObj;
    case NodeKind::kArray:
      return kArr;
    case NodeKind::kChoice: {
      unsigned t = 0;
      for (int32_t c : n.children) t |= types_of(g, c, lits, depth + 1);
      return t;
    }
    case NodeKind::kSequence:
    case NodeKind::kRoot:
      break;
  }
  return ~0u;
}

void visit(const Grammar& g, int32_t id, std::vector<uint8_t>& mark) {
  const Node& n = g.nodes[size_t(id)];
  if (n.kind != NodeKind::kChoice || mark[size_t(id)] == 2) return;
  if (mark[size_t(id)] == 1)
    refuse("$ref", "a $ref/anyOf cycle reaches itself without producing any byte");
  mark[size_t(id)] = 1;
  for (int32_t c : n.children) visit(g, c, mark);
  mark[size_t(id)] = 2;
}

}  // namespace

void check_one_of_disjoint(const Grammar& g, const std::vector<int32_t>& branches,
                           const std::string& path) {
  // The branches' JSON types must be disjoint, except literals, which must differ from each other
  // and from the typed branches.
  unsigned seen = 0;
  std::set<std::string> literals;
  for (int32_t k : branches) {
    std::set<std::string> lits;
    const unsigned t = types_of(g, k, lits, 0);
    for (const auto& l : lits)
      if (!literals.insert(l).second)
        refuse(path, "branches can produce the same value (" + l + "); use anyOf");
    if (t & seen) refuse(path, "branches can produce the same JSON type; use anyOf");
    seen |= t;
  }
  for (const auto& l : literals)
    if (type_of_literal(l) & seen)
      refuse(path, "a literal branch (" + l + ") overlaps a typed branch; use anyOf");
}

void check_finite_values(const Grammar& g) {
  // Horn propagation: a choice is finite once one child is; any other node once every child it
  // cannot skip is. `waiting` counts what a node still waits for; `users` are the reverse edges.
  const size_t count = g.nodes.size();
  std::vector<int32_t> waiting(count, 0);
  std::vector<std::vector<int32_t>> users(count);
  auto needs = [&](size_t id, int32_t child) {
    users[size_t(child)].push_back(int32_t(id));
    ++waiting[id];
  };
  for (size_t i = 0; i < count; ++i) {
    const Node& n = g.nodes[i];
    switch (n.kind) {
      case NodeKind::kChoice:
        for (int32_t c : n.children) users[size_t(c)].push_back(int32_t(i));
        waiting[i] = n.children.empty() ? 0 : 1;
        break;
      case NodeKind::kObject:
        for (const Property& p : n.properties)
          if (p.required) needs(i, p.value_node);
        break;
      case NodeKind::kArray:
        if (n.min_items > 0) needs(i, n.value_node);
        break;
      case NodeKind::kSequence:
        for (size_t k = 0; k < n.children.size(); ++k)
          if (!n.optional[k]) needs(i, n.children[k]);
        break;
      case NodeKind::kRoot:
        needs(i, n.value_node);
        break;
      case NodeKind::kLiteral:
      case NodeKind::kString:
      case NodeKind::kNumber:
        break;
    }
  }
  std::vector<int32_t> ready;
  std::vector<uint8_t> finite(count, 0);
  for (size_t i = 0; i < count; ++i)
    if (waiting[i] == 0) finite[i] = 1, ready.push_back(int32_t(i));
  while (!ready.empty()) {
    const int32_t done = ready.back();
    ready.pop_back();
    for (int32_t u : users[size_t(done)])
      if (!finite[size_t(u)] && --waiting[size_t(u)] == 0)
        finite[size_t(u)] = 1, ready.push_back(u);
  }
  for (size_t i = 0; i < count; ++i)
    if (!finite[i])
      refuse("$ref",
             "a schema has no finite value: a required property or a minItems item $refs "
             "back to it, so every value would nest forever");
}

void check_choice_cycles(const Grammar& g) {
  std::vector<uint8_t> mark(g.nodes.size(), 0);  // 1 on the path, 2 done
  for (size_t i = 0; i < g.nodes.size(); ++i) visit(g, int32_t(i), mark);
}

}  // namespace sparkglm::grammar
