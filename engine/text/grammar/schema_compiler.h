#pragma once
// OutputConstraint -> Grammar (grammar.h): json_object, json_schema, a choice, or forced GLM tool
// calls (tool_call_grammar.cpp). The supported JSON Schema subset:
//   type (a name or a list): object, array, string, number, integer, boolean, null
//   object: properties, required, additionalProperties (false / true / a schema)
//   array: items (one schema), minItems, maxItems
//   string: minLength, maxLength
//   number / integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers: no exponent
//     when bounded; integers: exact 64-bit bounds)
//   enum, const (any JSON values), anyOf, oneOf (only when its branches cannot overlap: different
//     JSON types, or distinct literals), $ref to "#/$defs/NAME" or "#/definitions/NAME"
//   annotations, ignored: title, description, default, examples, $schema, $id, $comment,
//     deprecated, readOnly, writeOnly, $defs, definitions
// Properties are generated in schema order. An object with `properties` gets only those keys, even
// when additionalProperties allows more (the output is still valid); one without `properties` and
// with additionalProperties true, absent or a schema is free-form: any keys, values of that schema.
// A schema `{}` / true, json_object's values and free-form values are any JSON value nested at most
// GrammarLimits::free_value_depth deep.
//
// Any other keyword is refused: Error(kInvalidArgument) naming the keyword and its JSON path
// ("$.properties.name.pattern"). So are a depth, node count, literal size or $ref count above the
// limits, a $ref that does not resolve, and anyOf/$ref cycles that consume nothing.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/text/grammar/grammar.h"
#include "engine/text/output_constraint.h"

namespace sparkglm::grammar {

// The grammar bytes of a special tag ("<tool_call>"), nullopt when the vocabulary has none
// (TokenVocabulary::tag_bytes).
using TagBytes = std::function<std::optional<std::string>(std::string_view)>;

// constraint.active() must be true. Tool calls (kToolCall) need `tag_bytes`.
Grammar compile_grammar(const OutputConstraint& constraint, const GrammarLimits& limits = {},
                        const TagBytes& tag_bytes = nullptr);

// Pieces the tool-call compiler (tool_call_grammar.cpp) shares:
// appends a node (Error naming `path` beyond max_nodes);
int32_t add_node(Grammar& g, Node n, const std::string& path);
// compiles `schema` (a part of `root`, which its $refs resolve against) into g's nodes;
int32_t compile_schema_node(Grammar& g, const nlohmann::json& root, const nlohmann::json& schema,
                            const std::string& path);
// adds the kRoot over `value` and checks the grammar (grammar_checks.cpp).
void finish_grammar(Grammar& g, int32_t value, bool json_root);
// GLM tool calls naming one of `tools` (OutputConstraint::kToolCall): tool_call_grammar.cpp.
int32_t compile_tool_calls(Grammar& g, const std::vector<nlohmann::json>& tools,
                           const TagBytes& tag_bytes);

// grammar_checks.cpp: oneOf branches that cannot produce one value twice (Error naming `path`
// otherwise), and no kChoice reaching itself through choices only (it would expand forever).
void check_one_of_disjoint(const Grammar& g, const std::vector<int32_t>& branches,
                           const std::string& path);
void check_choice_cycles(const Grammar& g);
// And every node has a finite value (Error otherwise): a required property or minItems item that
// $refs back to its own schema would leave the matcher nesting until no token is allowed.
void check_finite_values(const Grammar& g);

}  // namespace sparkglm::grammar
