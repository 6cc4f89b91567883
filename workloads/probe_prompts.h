#pragma once
// The prompts of the structured quality probes, in the formats tinyglm/train/curriculum.py trains
// (so that the trained tinyGLM is asked what it learned): a tool call among the offered tools, and
// one JSON object that follows a given schema. Each fills a Prompt's parts from the request's seed:
//
//   tool_call    the user asks for the weather in a city, an order's status or a sum; all three
//                tools of the curriculum are offered in the body's "tools" (get_weather,
//                lookup_order, add_numbers). expected: {"name": ..., "arguments": {...}}, compact.
//   json_schema  "Task: output one JSON object that follows this schema, and nothing else." with
//                2-5 of the curriculum's eight typed fields and their values. expected: the schema,
//                compact. constrained: the body also asks for it as response_format json_schema,
//                so the engine's grammar must make every output valid.
//
// Both put "Background notes, not needed for the task:" and prose filler between the marker line
// and the task, which calibration sizes to the case's exact token count.
#include <cstdint>

#include "workloads/prompt_builder.h"

namespace sparkglm::workloads {

void tool_call_prompt(Prompt& p, uint64_t seed);
void json_schema_prompt(Prompt& p, uint64_t seed, bool constrained);

}  // namespace sparkglm::workloads
