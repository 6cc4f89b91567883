#pragma once
// One choice of a GenerationCall: `n` per request, each an independent engine sequence with the
// same prompt, answered as choices[i] with "index": i. A choice turns its sequence's token events
// into text (OutputText), tool calls (ToolCallOutput), logprobs and token ids, and knows how it
// ended; a body gathers them here, a stream sends each ChoiceUpdate as it comes.
//
// Seeds: with a request seed s, choice 0 samples with s itself (so n = 1 and choice 0 of any n
// agree) and choice i > 0 with choice_seed(s, i), the i-th output of SplitMix64 seeded with s.
// Without one, every sequence takes the scheduler's own fallback seed.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/runtime/generation_request.h"
#include "engine/server/generation_setup.h"
#include "engine/server/openai_response.h"
#include "engine/server/output_text.h"
#include "engine/server/token_codec.h"
#include "engine/server/tool_call_output.h"
#include "engine/text/reasoning_parser.h"

namespace sparkglm::server {

// Choice `index`'s sampling seed for a request seeded with `seed` (see the top).
uint64_t choice_seed(uint64_t seed, int index);

// What one engine event did to a choice.
struct ChoiceUpdate {
  ReasoningDelta text;                 // the text a client may see now
  std::vector<GeneratedToken> tokens;  // the tokens handled (up to a stop string)
  std::vector<size_t> offsets;         // where each token's text starts in the completion text
  nlohmann::json calls = nlohmann::json::array();  // tool calls completed, as delta entries
};

class GenerationChoice {
 public:
  GenerationChoice(int index, const GenerationSetup& setup, const TokenCodec& codec);

  int index() const { return index_; }
  // The engine request of this choice: the prompt and fields of `setup`, this choice's seed.
  GenerationRequest request() const;

  // Handles one event of this choice's sequence. The event ends the choice (ended() turns true)
  // when it finishes the sequence or completes a stop string; a stop string also cancels the
  // sequence, since the engine does not match them.
  ChoiceUpdate add(const RequestEvent& e);
  // A body keeps what the update showed; a stream sends it instead (stream_choice).
  void keep(ChoiceUpdate u);

  // Stream: the chunk's choice for `u`, or null when it has nothing to send.
  nlohmann::json stream_choice(const ChoiceUpdate& u) const;
  // Stream: the choice that opens a chat stream (the role) and the one that closes this choice.
  nlohmann::json role_choice() const;
  nlohmann::json calls_choice(nlohmann::json calls) const;  // ChoiceUpdate::calls, as a delta
  nlohmann::json final_chunk_choice() const;
  // Body: the whole choice, with its finish_reason.
  nlohmann::json answer() const;

  // After add() returned an update that ended a normal finish: "stop", "length" or "tool_calls";
  // null while running or when the sequence failed (the call fails then, not the choice).
  const char* finish_reason() const { return finish_; }
  bool ended() const { return ended_; }
  int tokens() const { return text_.tokens(); }
  int reasoning_tokens() const { return text_.reasoning_tokens(); }

  std::shared_ptr<RequestHandle> handle;  // set once the engine took the sequence

 private:
  bool is_stop_token(int32_t id) const;
  nlohmann::json choice(nlohmann::json delta_or_text, const nlohmann::json& logprobs,
                        const nlohmann::json& finish, const nlohmann::json& stop_reason) const;

  int index_;
  const GenerationSetup& setup_;
  const TokenCodec& codec_;
  OutputText text_;
  std::optional<ToolCallOutput> tool_calls_;  // chat with tools to parse for
  bool ended_ = false;
  const char* finish_ = nullptr;
  nlohmann::json stop_reason_;  // the stop string or stop token id that ended it, else null
  size_t text_bytes_ = 0;       // completion text so far: the next token's text_offset
  std::vector<int32_t> output_ids_;
  // The whole answer, for a body; a stream sends it as it comes.
  std::string reasoning_, content_;
  nlohmann::json message_calls_ = nlohmann::json::array();  // a body's message.tool_calls
  nlohmann::json chat_logprobs_ = nlohmann::json::array();
  CompletionLogprobs completion_logprobs_;
};

}  // namespace sparkglm::server
