#pragma once
// Deterministic prompts for the workloads, by builder name, with exact token counts.
//
// A Prompt is fixed text around one filler slot: slot message = head + filler(units) + pad + tail.
// calibrate() chooses the number of filler units and a few single-token pad pieces until the
// server's own count of the whole request equals the target exactly, or says why it cannot.
//
// Markers: every request's prompt begins its slot message with "[[sg:<salt>:<tag>]]", where tag is
// the request index ("3"), or with fresh_each_repetition the repetition too ("r2:3", warmups
// "w1:3"). The marker never names the repetition otherwise, so a request repeats byte for byte
// across repetitions (the G2 determinism criterion needs that); the body's cache_salt keeps
// repetitions from hitting each other's prefix cache instead. Cases that share a salt send the
// same prompts (determinism C1 vs C4). Text from the random streams never contains "[[".
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workloads/workload_spec.h"

namespace sparkglm::workloads {

// The prompt-token count of a whole request body as the server sees it (chat: the rendered
// messages with the body's template switches; completions: the prompt with its special prefix).
// The runner implements it with POST /tokenize of tokenize_body(body).
using TokenCounter = std::function<int32_t(const nlohmann::json& request_body)>;
// A counter of plain text, for prompts whose text is the whole story (tests, offline tools).
using TextTokenCounter = std::function<int32_t(const std::string& text)>;

// The /tokenize body that counts a chat or completions body's prompt exactly: its messages (or
// prompt) and the fields that change the rendering, nothing else.
nlohmann::json tokenize_body(const nlohmann::json& request_body);

struct PromptMessage {
  std::string role;  // "system" / "user" / "assistant"
  std::string content;
};

struct Prompt {
  Endpoint endpoint = Endpoint::kCompletions;
  std::vector<PromptMessage> messages;  // completions: exactly one message, its content the prompt
  size_t slot = 0;                      // the message holding the filler slot
  std::string head, tail;               // around the filler in messages[slot]
  std::function<std::string(int64_t units)> filler;  // prefix-stable in units, deterministic
  int64_t units = 0;
  std::string pad;       // single-token pieces appended to the filler
  std::string marker;    // "" when the prompt carries none
  std::string expected;  // what a grader checks (arithmetic value, needle value, ...), "" for none
  nlohmann::json body_extra = nlohmann::json::object();  // more body fields: tools, response_format
  int32_t tokens = -1;  // the calibrated count, -1 when not calibrated

  void render();                       // writes messages[slot].content from the parts
  nlohmann::json body_fields() const;  // {"messages": [...]} or {"prompt": "..."}, body_extra
  const std::string& text() const { return messages.at(slot).content; }
};

// Who the request is: the case's salt and the request's place in it.
struct RequestIdentity {
  std::string salt;
  int32_t index = 0;
  int32_t repetition = 0;
  bool tag_repetition = false;  // fresh_each_repetition
};

std::string make_marker(const RequestIdentity& id);  // "[[sg:<salt>:<tag>]]"
bool is_marker_text(const std::string& text);        // the whole text is one marker

// The builders' names: prose (alias filler), code, structured, counting, arithmetic, needle,
// conversation, tool_call and json_schema (probe_prompts.h).
const std::vector<std::string>& builder_names();
bool is_builder(const std::string& name);

// Fits `prompt` to exactly `target` tokens of counter(body_base + prompt.body_fields()); sets
// units, pad, tokens and renders. Throws Error(kInvalidArgument) naming the target and the count
// it reached when the fixed text alone is longer or no pad piece lands exactly.
void calibrate(Prompt& prompt, int32_t target, const nlohmann::json& body_base,
               const TokenCounter& count);
// The same against a counter of the slot message's text alone.
void calibrate(Prompt& prompt, int32_t target, const TextTokenCounter& count);

// Every prompt of one repetition of a case, request by request, in index order; with `count`
// each is calibrated to spec.prompt.tokens_for(i) (conversation turns in order, each turn's
// history the earlier calibrated turns), without it sized by an estimate (tokens stays -1).
// Replays (warm_replay) are copies of their originals. body_base carries template switches.
std::vector<Prompt> build_case_prompts(const CaseSpec& spec, int32_t repetition,
                                       const nlohmann::json& body_base, const TokenCounter& count);

}  // namespace sparkglm::workloads
