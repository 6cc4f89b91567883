#include "engine/server/generation_choice.h"

#include <algorithm>
#include <chrono>
#include <string_view>
#include <utility>

namespace sparkglm::server {

using nlohmann::json;

namespace {

OutputTextOptions text_options(const GenerationSetup& s) {
  OutputTextOptions o;
  o.stop = s.fields.stop;
  o.include_stop_str_in_output = s.fields.include_stop_str_in_output;
  o.skip_special_tokens = s.fields.skip_special_tokens;
  o.split_reasoning = s.chat();
  o.starts_in_reasoning = s.thinking;
  o.min_tokens = s.fields.sampling.min_tokens;
  return o;
}

}  // namespace

uint64_t choice_seed(uint64_t seed, int index) {
  if (index == 0) return seed;
  // SplitMix64's index-th output: its state advances by the golden gamma, then is mixed.
  uint64_t z = seed + uint64_t(index) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

GenerationChoice::GenerationChoice(int index, const GenerationSetup& setup, const TokenCodec& codec)
    : index_(index), setup_(setup), codec_(codec), text_(codec, text_options(setup)) {
  if (!setup_.tools.empty()) tool_calls_.emplace(setup_.tools, setup_.parallel_tool_calls);
}

GenerationRequest GenerationChoice::request() const {
  GenerationRequest request;
  request.prompt = setup_.prompt;
  request.sampling = setup_.fields.sampling;
  if (request.sampling.seed) request.sampling.seed = choice_seed(*request.sampling.seed, index_);
  request.cache_salt = setup_.fields.cache_salt;
  request.disable_speculation = setup_.fields.disable_mtp;
  request.constraint = setup_.fields.constraint;
  request.grammar = setup_.grammar;
  if (setup_.request_timeout_s > 0)
    request.deadline =
        setup_.arrived + std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::duration<double>(setup_.request_timeout_s));
  return request;
}

bool GenerationChoice::is_stop_token(int32_t id) const {
  const auto& stops = setup_.fields.sampling.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), id) != stops.end()) return true;
  return !setup_.fields.sampling.ignore_eos &&
         std::find(setup_.eos_ids.begin(), setup_.eos_ids.end(), id) != setup_.eos_ids.end();
}

ChoiceUpdate GenerationChoice::add(const RequestEvent& e) {
  ChoiceUpdate u;
  for (size_t i = 0; i < e.tokens.size(); ++i) {
    const GeneratedToken& t = e.tokens[i];
    const bool terminal =
        e.finish == FinishReason::kStop && i + 1 == e.tokens.size() && is_stop_token(t.id);
    u.offsets.push_back(text_bytes_);
    ReasoningDelta d = text_.add(t.id, terminal);
    text_bytes_ += d.content.size() + d.reasoning.size();
    u.text.reasoning += d.reasoning;
    u.text.content += d.content;
    u.tokens.push_back(t);
    output_ids_.push_back(t.id);
    if (text_.stop_string()) break;
  }
  const bool stopped_by_string = text_.stop_string().has_value();
  ended_ = stopped_by_string || e.finish != FinishReason::kNone;
  if (ended_ && !stopped_by_string) {
    ReasoningDelta rest = text_.finish();
    u.text.reasoning += rest.reasoning;
    u.text.content += rest.content;
  }
  if (tool_calls_) {
    u.text.content = tool_calls_->feed(u.text.content, u.calls);
    if (ended_) u.text.content += tool_calls_->flush(u.calls);
  }
  if (stopped_by_string) {
    // The stop string is the server's: the engine learns of it through cancellation.
    if (handle) handle->cancel();
    finish_ = "stop";
    stop_reason_ = *text_.stop_string();
  } else if (e.finish == FinishReason::kStop) {
    finish_ = "stop";
    if (!e.tokens.empty() && is_stop_token(e.tokens.back().id)) stop_reason_ = e.tokens.back().id;
  } else if (e.finish == FinishReason::kLength) {
    finish_ = "length";
  }
  // A turn that ended by itself after calling tools asks for their results.
  if (finish_ && tool_calls_ && tool_calls_->calls() > 0 && std::string_view(finish_) == "stop")
    finish_ = "tool_calls";
  return u;
}

void GenerationChoice::keep(ChoiceUpdate u) {
  reasoning_ += u.text.reasoning;
  content_ += u.text.content;
  if (setup_.fields.sampling.logprobs)
    for (size_t i = 0; i < u.tokens.size(); ++i) {
      if (setup_.chat())
        chat_logprobs_.push_back(chat_logprob(codec_, u.tokens[i]));
      else
        completion_logprobs_.add(codec_, u.tokens[i], u.offsets[i]);
    }
  for (json& call : u.calls) {
    call.erase("index");
    message_calls_.push_back(std::move(call));
  }
}

json GenerationChoice::stream_choice(const ChoiceUpdate& u) const {
  const bool logprobs = setup_.fields.sampling.logprobs;
  const ReasoningDelta& d = u.text;
  if (d.empty() && u.tokens.empty()) return nullptr;
  if (d.empty() && !logprobs && !setup_.fields.return_token_ids) return nullptr;
  json lp = nullptr;
  if (logprobs && !u.tokens.empty()) {
    if (setup_.chat()) {
      json content = json::array();
      for (const auto& t : u.tokens) content.push_back(chat_logprob(codec_, t));
      lp = {{"content", std::move(content)}};
    } else {
      CompletionLogprobs c;
      for (size_t i = 0; i < u.tokens.size(); ++i) c.add(codec_, u.tokens[i], u.offsets[i]);
      lp = c.to_json();
    }
  }
  json body;
  if (setup_.chat()) {
    body = json::object();
    if (!d.reasoning.empty()) body["reasoning"] = body["reasoning_content"] = d.reasoning;
    if (!d.content.empty()) body["content"] = d.content;
  } else {
    body = d.content;
  }
  json c = choice(std::move(body), lp, nullptr, nullptr);
  if (setup_.fields.return_token_ids) {
    json ids = json::array();
    for (const auto& t : u.tokens) ids.push_back(t.id);
    c["token_ids"] = std::move(ids);
  }
  return c;
}

namespace {

json reason_json(const char* reason) {
  return reason ? json(reason) : json(nullptr);
}

}  // namespace

json GenerationChoice::role_choice() const {
  return choice({{"role", "assistant"}, {"content", ""}}, nullptr, nullptr, nullptr);
}

json GenerationChoice::calls_choice(json calls) const {
  return choice({{"tool_calls", std::move(calls)}}, nullptr, nullptr, nullptr);
}

json GenerationChoice::final_chunk_choice() const {
  return choice(setup_.chat() ? json::object() : json(""), nullptr, reason_json(finish_),
                stop_reason_);
}

json GenerationChoice::answer() const {
  json body;
  json lp = nullptr;
  if (setup_.chat()) {
    json message = {{"role", "assistant"}, {"content", content_}};
    if (!message_calls_.empty()) {
      message["tool_calls"] = message_calls_;
      if (content_.empty()) message["content"] = nullptr;
    }
    // `reasoning` is vLLM's current name; `reasoning_content` stays for older clients.
    if (setup_.thinking) message["reasoning"] = message["reasoning_content"] = reasoning_;
    if (setup_.fields.sampling.logprobs) lp = {{"content", chat_logprobs_}};
    body = std::move(message);
  } else {
    if (setup_.fields.sampling.logprobs) lp = completion_logprobs_.to_json();
    body = content_;
  }
  json c = choice(std::move(body), lp, reason_json(finish_), stop_reason_);
  if (setup_.fields.return_token_ids) c["token_ids"] = output_ids_;
  return c;
}

json GenerationChoice::choice(json delta_or_text, const json& logprobs, const json& finish,
                              const json& stop_reason) const {
  json c = {{"index", index_}};
  if (setup_.chat())
    c[setup_.fields.stream ? "delta" : "message"] = std::move(delta_or_text);
  else
    c["text"] = std::move(delta_or_text);
  c["logprobs"] = logprobs;
  c["finish_reason"] = finish;
  if (!finish.is_null()) c["stop_reason"] = stop_reason;
  return c;
}

}  // namespace sparkglm::server
