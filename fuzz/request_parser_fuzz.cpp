// Feeds arbitrary bytes to the OpenAI request parser (body JSON, then the chat, completion,
// tokenize and detokenize readers and the chat template). An ApiError is the parser rejecting the
// input, which is correct; anything else (a crash, a sanitizer report, another exception) is a bug.
//
// Random bytes rarely form a request deep enough to reach the field readers, so half the inputs
// are spliced into one of a few valid bodies: byte 0 picks the body and mode, byte 1 the place,
// and the rest replaces or is inserted there.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

#include "engine/server/api_error.h"
#include "engine/server/openai_request.h"

namespace {

constexpr std::string_view kBodies[] = {
    R"({"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}],"temperature":0.5,"top_p":0.9,"top_k":5,"seed":3,"max_tokens":16,"stop":["a","b"],"logprobs":true,"top_logprobs":2,"stream":true,"stream_options":{"include_usage":true}})",
    R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":"x","reasoning_content":"r","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"k\":1}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"chat_template_kwargs":{"enable_thinking":false},"reasoning_effort":"high"})",
    R"({"model":"m","prompt":"hello","max_tokens":8,"logprobs":3,"echo":false,"stop":"x","stop_token_ids":[1,2],"min_tokens":1,"ignore_eos":true,"return_token_ids":true,"cache_salt":"s"})",
    R"({"prompt":[[1,2,3]],"add_special_tokens":false,"presence_penalty":1,"frequency_penalty":-1,"repetition_penalty":1.2,"min_p":0.1})",
    R"({"tokens":[104,105,258],"messages":[{"role":"user","content":"t"}],"add_generation_prompt":true})",
};

void parse_all(std::string_view body) {
  using namespace sparkglm::server;
  const ServedModel model{"m", 4096, 320};
  nlohmann::json j;
  try {
    j = parse_json_body(body);
  } catch (const ApiError&) {
    return;
  }
  auto attempt = [&](auto parse) {
    try {
      parse(j, model);
    } catch (const ApiError&) {
    }
  };
  attempt([](const nlohmann::json& b, const ServedModel& m) {
    const ChatCompletionRequest r = parse_chat_completion(b, m);
    (void)r.chat.render();
  });
  attempt([](const nlohmann::json& b, const ServedModel& m) { (void)parse_completion(b, m); });
  attempt([](const nlohmann::json& b, const ServedModel& m) {
    const TokenizeRequest r = parse_tokenize(b, m);
    if (r.chat) (void)r.chat->render();
  });
  attempt([](const nlohmann::json& b, const ServedModel& m) { (void)parse_detokenize(b, m); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (size < 2 || (data[0] & 1) == 0) {
    parse_all(input);
    return 0;
  }
  const std::string_view base = kBodies[(data[0] >> 2) % std::size(kBodies)];
  const size_t at = data[1] % (base.size() + 1);
  const std::string_view piece = input.substr(2);
  std::string body(base.substr(0, at));
  body += piece;
  // Mode bit 1: replace as many bytes as were given, else insert.
  const size_t resume = (data[0] & 2) ? std::min(base.size(), at + piece.size()) : at;
  body += base.substr(resume);
  parse_all(body);
  return 0;
}
