#pragma once
// What the routes settle for one chat or text completion before a GenerationCall starts it: the
// fields, the prompt, the output constraint and tools, and the server's limits that apply.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/server/openai_request.h"
#include "engine/text/grammar/compiled_grammar.h"

namespace sparkglm::server {

enum class ApiKind { kChat, kCompletion };

struct GenerationSetup {
  ApiKind kind = ApiKind::kChat;
  std::string model_id;
  GenerationFields fields;  // fields.sampling.max_tokens is settled; fields.n choices
  std::vector<int32_t> prompt;
  bool thinking = false;  // chat: the prompt leaves the reasoning section open
  std::vector<int> eos_ids;
  double request_timeout_s = 0;  // 0: none
  // fields.constraint compiled for the engine's mask (RouteOptions::compile_constraint); null when
  // the output is free.
  std::shared_ptr<const CompiledGrammar> grammar;
  // Chat: the request's tools when content is searched for tool calls (ToolCallOutput); empty:
  // content is plain text.
  std::vector<nlohmann::json> tools;
  bool parallel_tool_calls = true;
  // Streams: 0 = a drain per batch of events, posted by the engine thread (each engine step wakes
  // the connection). Otherwise, while events keep coming, the strand drains once per interval by
  // a timer and the engine thread posts nothing: a step shorter than a thread wake-up then does
  // not pay one per token. The first event after a quiet interval is posted at once. The timers of
  // all streams fire on one grid, so one wake-up serves every connection.
  std::chrono::microseconds flush_interval{0};
  std::chrono::steady_clock::time_point arrived = std::chrono::steady_clock::now();

  bool chat() const { return kind == ApiKind::kChat; }
};

}  // namespace sparkglm::server
