#pragma once
// Token counters for the workload tests: stand-ins for the server's /tokenize. The byte counter
// is tinyGLM's real tokenizer and chat template, counted the way the server counts a request.
#include <cstdint>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/text/byte_tokenizer.h"
#include "engine/text/chat_template.h"
#include "workloads/prompt_builder.h"

namespace sparkglm::workloads::testing {

// The text the server tokenizes for a request body, and whether it adds [gMASK]<sop> first.
inline std::string server_text(const nlohmann::json& body, bool& add_prefix) {
  if (body.contains("messages")) {
    add_prefix = body.value("add_special_tokens", false);
    return parse_chat_messages(body).render();
  }
  add_prefix = body.value("add_special_tokens", true);
  return body.at("prompt").get<std::string>();
}

// tinyGLM: one token per byte, special-token texts one token each.
inline int32_t byte_tokens(const nlohmann::json& body) {
  bool prefix = false;
  const std::string text = server_text(body, prefix);
  const ByteTokenizer tokenizer;
  return int32_t(tokenizer.encode(text).size()) + (prefix ? 2 : 0);
}

// A whitespace-separated word count: a tokenizer whose units are never one byte.
inline int32_t word_count(const std::string& text) {
  std::istringstream in(text);
  std::string word;
  int32_t n = 0;
  while (in >> word) ++n;
  return n;
}
inline int32_t word_tokens(const nlohmann::json& body) {
  bool prefix = false;
  return word_count(server_text(body, prefix));
}

inline int32_t raw_bytes(const std::string& text) {
  return int32_t(text.size());
}

}  // namespace sparkglm::workloads::testing
