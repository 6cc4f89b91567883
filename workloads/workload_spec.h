#pragma once
// A workload as data (QUALIFICATION.md, "Workloads"): one JSON file in workloads/ per workload,
// read and checked here. workloads/README.md documents every field; a spec's identity in a bundle
// is the SHA-256 of its file bytes plus the scale it ran at.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/arrival_schedule.h"

namespace sparkglm::workloads {

inline constexpr const char* kWorkloadSchema = "sparkglm.workload/1";

enum class Endpoint { kChat, kCompletions };
const char* to_string(Endpoint endpoint);      // "chat" / "completions" (the JSON spelling)
const char* endpoint_path(Endpoint endpoint);  // "/v1/chat/completions" / "/v1/completions"

// How one case's prompts are made (prompt_builder.h has the builders).
struct PromptSpec {
  std::string builder;            // one of prompt_builder.h's builder_names()
  uint64_t seed = 0;              // the builder's seed; request i draws from (seed, i)
  std::vector<int32_t> tokens;    // exact prompt tokens per request index (size 1: every request)
  int32_t min_tokens = 16;        // floor under scale: the builder's fixed text must fit in it
  int32_t system_tokens = 0;      // conversation: tokens of a system prompt every session shares
  std::vector<int32_t> sessions;  // conversation: the session request i continues (empty: all 0)
  bool echo_marker = false;       // ask the model to begin its reply with the request's marker
  bool constrained = false;       // json_schema: the schema also goes as response_format
  double depth =
      -1;  // needle: where the needle's row sits in each table, in [0, 1] (-1: 37 %, 61 %)

  int32_t tokens_for(int32_t index) const { return tokens.size() == 1 ? tokens[0] : tokens[index]; }
};

// A grader by name with its parameters; in JSON either "name" or {"name": ..., params...}.
struct GraderSpec {
  std::string name;
  nlohmann::json params = nlohmann::json::object();  // every key but "name"
};

struct CaseSpec {
  std::string id;  // ^[a-z0-9][a-z0-9_-]*$, unique in the workload
  std::string title;
  Endpoint endpoint = Endpoint::kCompletions;
  PromptSpec prompt;
  int32_t max_tokens = 0;
  bool ignore_eos = true;
  bool return_token_ids = true;
  nlohmann::json sampling = nlohmann::json::object();  // body fields; temperature 0 when absent
  nlohmann::json chat_template_kwargs;                 // chat only; null when absent
  harness::ArrivalSchedule arrival;
  int32_t requests = 1;         // requests per repetition
  int32_t repetitions = 3;      // measured repetitions
  int32_t min_repetitions = 1;  // floor under scale (3 in a gate workload unless set)
  int32_t warmups = 0;          // discarded repetitions run first (repetition -warmups .. -1)
  std::string salt;             // ^[a-z0-9][a-z0-9-]*$; cases sharing a salt send the same prompts
  bool warm_replay = false;     // odd request 2k+1 repeats request 2k's body byte for byte
  bool fresh_each_repetition =
      false;  // the marker names the repetition: new prompt bytes each time
  // Every request sends a cache_salt of its own, so nothing it sends can hit a prefix cache: the
  // cold reference that a warm case's determinism grader compares its outputs with.
  bool cold_prefill = false;
  double timeout_s = 600;
  std::vector<GraderSpec> graders;
};

struct WorkloadSpec {
  std::string schema;  // kWorkloadSchema
  std::string id;      // ^[a-z0-9][a-z0-9._-]*$, the file's stem
  std::string title;
  std::string description;
  bool gate = false;  // a gate's cases keep >= 3 repetitions under any scale
  std::vector<CaseSpec> cases;

  std::string source;  // the file it was read from ("" when parsed from memory)
  std::string sha256;  // of the file bytes (scaled() keeps it: the scale is recorded beside it)
  double scale = 1;

  const CaseSpec* find_case(const std::string& case_id) const;  // nullptr when absent
};

// Reads and validates a spec; every problem is Error(kInvalidConfig) "<source>: <field>: <what,
// expected what>", e.g. "workloads/x.json: cases[1].prompt.tokens: ...". Unknown keys are errors.
WorkloadSpec parse_workload(const nlohmann::json& j, const std::string& source = "<memory>");
// parse_workload of the file, with sha256 of its bytes; the id must equal the file's stem.
WorkloadSpec load_workload(const std::string& path);
// The *.json specs of a folder, sorted by name (README.md and others are skipped).
std::vector<std::string> workload_files(const std::string& dir);

// The same workload run small (README.md, "Scale"), 0 < scale <= 1: prompt tokens (and
// system_tokens) become max(min_tokens, round(t * scale)), max_tokens max(min(8, m),
// round(m * scale)), repetitions max(min_repetitions, round(r * scale)), warmups
// max(min(1, w), round(w * scale)); nothing grows, arrivals and requests are unchanged.
WorkloadSpec scaled(const WorkloadSpec& spec, double scale);

}  // namespace sparkglm::workloads
