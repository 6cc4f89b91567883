#pragma once
// What the server hands the engine, and what the engine streams back. Events for one request are
// delivered in order, on the engine's thread: a handler must not block (it queues and returns).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/runtime/sampling_params.h"
#include "engine/text/grammar/compiled_grammar.h"
#include "engine/text/output_constraint.h"

namespace sparkglm {

enum class FinishReason {
  kNone,         // still running
  kStop,         // an eos id or a stop token id (the server also finishes on stop strings)
  kLength,       // max_tokens reached
  kCancelled,    // the client went away or the server cancelled it
  kTimeout,      // the request's deadline passed
  kError,        // the engine failed this request (message in RequestEvent::error)
  kDeviceFault,  // the device failed for good: the engine stopped (the reason in error)
};
const char* to_string(FinishReason r);

struct GeneratedToken {
  int32_t id = 0;
  float logprob = 0.0f;                                 // when logprobs were asked for
  std::vector<std::pair<int32_t, float>> top_logprobs;  // most likely first
};

struct RequestEvent {
  std::vector<GeneratedToken> tokens;  // new tokens (one per step today)
  FinishReason finish = FinishReason::kNone;
  std::string error;
  int prompt_tokens = 0;
  int completion_tokens = 0;  // so far
  int cached_tokens = 0;  // prompt tokens the prefix cache supplied (usage.prompt_tokens_details)
  std::chrono::steady_clock::time_point time;  // when the engine produced the event
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;  // sampling.max_tokens bounds the output
  // Seeds the prefix cache's keys: requests match each other's cached prefixes only under the
  // same salt (the OpenAI-style `cache_salt` request field; empty: the default).
  std::string cache_salt;
  // What the output must be (a JSON schema, a choice, a forced tool call); kNone: free text. The
  // server only sends an active one when RouteOptions::admit_constraint says the engine applies it.
  OutputConstraint constraint;
  // `constraint` compiled against the model's vocabulary (compile_output_constraint, at admission,
  // so a schema outside the subset is a 400); the scheduler masks every sampled token with it.
  // Null: unconstrained (an active constraint without it is refused by Scheduler::check_fits).
  std::shared_ptr<const CompiledGrammar> grammar;
  // The API's `disable_mtp`: no speculative decoding for this request (speculation/speculator.h).
  bool disable_speculation = false;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::function<void(const RequestEvent&)> on_event;
};

// The caller's handle: cancellation is a flag the engine reads at its next step, which then frees
// the request's blocks and state slot and sends a final kCancelled event.
class RequestHandle {
 public:
  explicit RequestHandle(uint64_t id) : id_(id) {}
  uint64_t id() const { return id_; }
  void cancel() { cancelled_.store(true, std::memory_order_release); }
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

 private:
  uint64_t id_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace sparkglm
