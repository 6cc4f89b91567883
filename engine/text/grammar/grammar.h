#pragma once
// The grammar a JSON Schema compiles to: a small set of value nodes that a byte-level pushdown
// automaton (byte_automaton.h) walks. Each node is one JSON value shape; composite nodes (object,
// array, root) push their children's frames, so the automaton's stack mirrors the value's nesting.
//
//   kLiteral  exact bytes: a const or enum value as JSON, true/false/null, a guided_choice string
//   kChoice   one of `children` (anyOf, enum, a type list); expanded when the value starts
//   kString   a JSON string, optionally min/max length in code points
//   kNumber   a JSON number or integer, optionally bounded
//   kObject   properties in schema order (required ones always, optional ones may be skipped), or
//             free-form keys (`free_keys`) with values of `value_node`
//   kArray    items of `value_node`, min/max items
//   kSequence `children` in order; those flagged in `optional` may be skipped (GLM's tool-call
//             markup: tags, names, argument keys and values)
//   kRoot     the whole output: optional leading whitespace (JSON), then `value_node`
//
// A kString with `raw` is text as GLM's tool calls write a string argument: no quotes, no escapes,
// any valid UTF-8, complete at any character boundary (the next tag ends it). Special tags are
// matched through TokenVocabulary::tag_bytes: bytes starting with 0xFF, which no text or JSON
// string can contain, so a tag is produced only by its token.//
// Whitespace policy: at every gap JSON allows whitespace (before the root value, around ':' and
// ',', after '{' / '[' and before '}' / ']'), at most GrammarLimits::max_whitespace bytes of
// ' ', '\n', '\t', '\r'. Nothing follows the root value: end of sequence is allowed exactly when
// the value is complete.
#include <cstdint>
#include <string>
#include <vector>

namespace sparkglm::grammar {

// Bounds on compilation and on a matcher's work; the defaults serve every request.
struct GrammarLimits {
  int max_schema_depth = 32;            // nesting of schema objects while compiling
  int max_nodes = 50000;                // grammar nodes of one schema
  int64_t max_literal_bytes = 1 << 20;  // total bytes of keys, consts and enum values
  int max_ref_expansions = 256;         // distinct $ref targets
  int max_stack_depth = 64;             // automaton frames: nesting of the generated value
  int max_stacks = 64;              // live automaton stacks (alternatives of anyOf/optional keys)
  int max_whitespace = 8;           // whitespace bytes at one gap
  int free_value_depth = 6;         // nesting of free-form values (json_object, {} schemas)
  int max_string_length = 1 << 20;  // a maxLength above this is treated as unbounded
  int max_rollback = 64;            // tokens a matcher can roll back
  int64_t mask_cache_bytes = 32 << 20;  // token-mask cache of one grammar
};

enum class NodeKind : uint8_t {
  kLiteral,
  kChoice,
  kString,
  kNumber,
  kObject,
  kArray,
  kSequence,
  kRoot
};

struct Property {
  int32_t key_node = -1;  // a kLiteral: the key with its quotes, as JSON
  int32_t value_node = -1;
  bool required = false;
};

struct Node {
  NodeKind kind = NodeKind::kLiteral;
  std::string literal;            // kLiteral
  std::vector<int32_t> children;  // kChoice, kSequence
  std::vector<uint8_t> optional;  // kSequence: [children], 1 where the child may be skipped
  bool raw = false;               // kString: GLM's raw argument text
  // kString: code points; -1 for no bound.
  int32_t min_length = 0, max_length = -1;
  // kNumber: integer only; bounds (inclusive after folding exclusive ones for integers).
  bool integer = false, has_min = false, has_max = false;
  bool exclusive_min = false, exclusive_max = false;  // numbers only
  int64_t imin = 0, imax = 0;
  double min = 0, max = 0;
  // kObject
  std::vector<Property> properties;
  bool free_keys = false;  // keys are `key_node` (a kString), values `value_node`
  int32_t key_node = -1;
  // kObject (free keys), kArray (items), kRoot (the value)
  int32_t value_node = -1;
  int32_t min_items = 0, max_items = -1;  // kArray
  bool json = true;                       // kRoot: leading whitespace allowed
};

struct Grammar {
  std::vector<Node> nodes;
  int32_t root = -1;  // a kRoot node
  GrammarLimits limits;
};

}  // namespace sparkglm::grammar
