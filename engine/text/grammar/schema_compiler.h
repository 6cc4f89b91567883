#pragma once
// OutputConstraint -> Grammar (grammar.h). The supported JSON Schema subset:
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
#include "engine/text/grammar/grammar.h"
#include "engine/text/output_constraint.h"

namespace sparkglm::grammar {

// constraint.active() must be true.
Grammar compile_grammar(const OutputConstraint& constraint, const GrammarLimits& limits = {});

}  // namespace sparkglm::grammar
