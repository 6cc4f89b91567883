// Checks over a compiled grammar (schema_compiler.h): oneOf branches must not overlap, and no
// choice may reach itself without producing a byte.
#include <set>
#include <string>

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

void check_choice_cycles(const Grammar& g) {
  std::vector<uint8_t> mark(g.nodes.size(), 0);  // 1 on the path, 2 done
  for (size_t i = 0; i < g.nodes.size(); ++i) visit(g, int32_t(i), mark);
}

}  // namespace sparkglm::grammar
