#pragma once
// The top-level fields each route reads, so that none is silently ignored: a field outside its
// route's table is a 400 naming it. The tables (openai_fields.cpp) are the list docs/api.md
// documents; a field there is implemented, refused by value where this server lacks the feature
// (`logit_bias` non-empty, `echo` true, ...), or accepted and unused because it carries nothing
// this server acts on (`user`).
#include <nlohmann/json.hpp>

namespace sparkglm::server {

// /tokenize reads a prompt or chat messages: the fields of the form given (kTokenizePrompt or
// kTokenizeMessages), as one that only the other form reads would be ignored.
enum class RequestRoute { kChat, kCompletion, kTokenizePrompt, kTokenizeMessages, kDetokenize };

// 400 naming the first field of `body` that `route` does not read. A JSON null counts as absent.
void check_known_fields(const nlohmann::json& body, RequestRoute route);

}  // namespace sparkglm::server
