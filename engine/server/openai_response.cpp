#include "engine/server/openai_response.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

#include "engine/text/utf8_stream.h"

namespace sparkglm::server {

using nlohmann::json;

namespace {

json byte_list(const std::string& s) {
  json bytes = json::array();
  for (unsigned char c : s) bytes.push_back(int(c));
  return bytes;
}

}  // namespace

std::string new_request_id(const char* prefix) {
  static const uint64_t process_key =
      std::random_device{}() * 0x9E3779B97F4A7C15ull ^
      uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  static std::atomic<uint64_t> counter{0};
  const uint64_t n = counter.fetch_add(1);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%016llx%08llx", prefix,
                static_cast<unsigned long long>(process_key),
                static_cast<unsigned long long>(n & 0xffffffffull));
  return buf;
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json usage_json(int prompt_tokens, int completion_tokens, int reasoning_tokens, int cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}},
          {"completion_tokens_details", {{"reasoning_tokens", reasoning_tokens}}}};
}

json chat_logprob(const TokenCodec& codec, const GeneratedToken& token) {
  const std::string text = codec.token_bytes(token.id);
  json top = json::array();
  for (const auto& [id, lp] : token.top_logprobs) {
    const std::string t = codec.token_bytes(id);
    top.push_back({{"token", t}, {"logprob", lp}, {"bytes", byte_list(t)}});
  }
  return {{"token", text},
          {"logprob", token.logprob},
          {"bytes", byte_list(text)},
          {"top_logprobs", std::move(top)}};
}

void CompletionLogprobs::add(const TokenCodec& codec, const GeneratedToken& token,
                             size_t text_offset) {
  tokens_.push_back(codec.token_bytes(token.id));
  logprobs_.push_back(token.logprob);
  json top = json::object();
  // Keys are the texts a client reads, so two ids can share one (bytes that are not UTF-8 all
  // read U+FFFD); the likelier id keeps it.
  for (const auto& [id, lp] : token.top_logprobs) {
    const std::string t = valid_utf8(codec.token_bytes(id));
    if (!top.contains(t)) top[t] = lp;
  }
  top_.push_back(std::move(top));
  offsets_.push_back(text_offset);
}

json CompletionLogprobs::to_json() const {
  return {{"tokens", tokens_},
          {"token_logprobs", logprobs_},
          {"top_logprobs", top_},
          {"text_offset", offsets_}};
}

void CompletionLogprobs::clear() {
  tokens_ = json::array();
  logprobs_ = json::array();
  top_ = json::array();
  offsets_ = json::array();
}

}  // namespace sparkglm::server
