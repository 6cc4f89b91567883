#pragma once
// The speculative-decoding target as data: the "speculation_targets" section of gates/G2.json,
// which `sparkglm-qualify measure --speculation-bench` judges speculation_bench files by, and
// which the verifier judges a speculation bundle by again (gates/speculation_bundle.h). A target
// changes by editing the JSON; the superseded G2.json goes to gates/history/.
//
//   "speculation_targets": {
//     "note": "...",
//     "checkpoint": "tinyglm/weights/tinyglm-micro-trained",  the bench's --model, as given
//     "device": "cuda",                                        the bench's --device
//     "concurrency": 1,       the concurrency the speedup is judged at
//     "min_prompts": 8,       optional: the distinct prompts a repetition of that concurrency's
//                             cells must run (speculation_bench --waves), so that one easy prompt
//                             cannot stand for the set; absent in definitions before 2026-12-06
//     "min_speedup": 1.6}     best median decode tok/s with k >= 1 over the k = 0 cell's
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace sparkglm::gates {

struct SpeculationTargets {
  std::string checkpoint;  // the model directory the speedup is stated for
  std::string device;      // cpu | cuda
  int concurrency = 1;
  std::optional<int> min_prompts;  // absent: any number of prompts
  double min_speedup = 1;

  // The section as parse_speculation_targets reads it (without "note"): what a speculation bundle
  // records as the targets it was judged by.
  nlohmann::json to_json() const;
};

// Every field but "note" is required and no other is allowed; errors are Error(kInvalidConfig)
// naming `where` and the field.
SpeculationTargets parse_speculation_targets(const nlohmann::json& j, const std::string& where);

}  // namespace sparkglm::gates
