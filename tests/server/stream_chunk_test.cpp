// The hand-written stream chunk must be byte for byte what nlohmann::json's dump() makes of the
// same chunk, for any text a token stream can produce, so that clients cannot tell the paths apart.
#include "engine/server/stream_chunk.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/server/sse_stream.h"

namespace sparkglm::server {
namespace {

using nlohmann::json;

std::string dumped(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The JSON path's chunk, as GenerationCall builds it.
std::string reference(bool chat, const std::string& id, int64_t created, const std::string& model,
                      bool usage, const std::string& reasoning, const std::string& content) {
  json c = {{"index", 0}};
  if (chat) {
    json delta = json::object();
    if (!reasoning.empty()) delta["reasoning"] = delta["reasoning_content"] = reasoning;
    if (!content.empty()) delta["content"] = content;
    c["delta"] = delta;
  } else {
    c["text"] = content;
  }
  c["logprobs"] = nullptr;
  c["finish_reason"] = nullptr;
  json r = {{"id", id},
            {"object", chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created},
            {"model", model},
            {"choices", json::array({c})}};
  if (usage) r["usage"] = nullptr;
  return sse_event(r);
}

std::string written(bool chat, const std::string& id, int64_t created, const std::string& model,
                    bool usage, const std::string& reasoning, const std::string& content) {
  StreamChunk chunk(chat, id, created, model, usage);
  std::string out = "prefix|";
  if (!chunk.append_delta(out, reasoning, content)) return "<refused>";
  EXPECT_EQ(out.substr(0, 7), "prefix|");
  return out.substr(7);
}

TEST(StreamChunk, EqualsTheJsonDumpForEveryShape) {
  const std::vector<std::string> texts = {"a",
                                          "hello world",
                                          "quote \" and backslash \\",
                                          "line\nbreak\ttab\rcr",
                                          std::string("\x00\x01\x1f\x7f", 4),
                                          "\b\f",
                                          "é ü 中文 🙂",
                                          "</think>",
                                          "{\"json\": [1]}"};
  for (bool chat : {true, false})
    for (bool usage : {true, false})
      for (const auto& t : texts) {
        EXPECT_EQ(written(chat, "cmpl-0123abc", 1795983327, "tinyglm-micro", usage, "", t),
                  reference(chat, "cmpl-0123abc", 1795983327, "tinyglm-micro", usage, "", t))
            << t;
        if (chat) {
          EXPECT_EQ(written(chat, "chatcmpl-9", 7, "m\"odel", usage, t, ""),
                    reference(chat, "chatcmpl-9", 7, "m\"odel", usage, t, ""));
          EXPECT_EQ(written(chat, "chatcmpl-9", 7, "m", usage, t, "and content"),
                    reference(chat, "chatcmpl-9", 7, "m", usage, t, "and content"));
        }
      }
}

TEST(StreamChunk, EveryValidUtf8TextMatchesAndInvalidTextIsRefused) {
  // Random byte strings: the valid ones must match dump() exactly, the invalid ones must be
  // refused (the JSON path then replaces their bad bytes).
  std::mt19937 rng(1234);
  int valid = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s(size_t(rng() % 6), '\0');
    for (char& c : s) {
      const uint32_t r = rng();
      // Bias towards the bytes where UTF-8 validity is decided.
      c = char((r & 3) == 0   ? 0x80 + (r >> 8) % 0x80
               : (r & 3) == 1 ? 0xc0 + (r >> 8) % 0x40
                              : (r >> 8) % 256);
    }
    std::string out;
    bool dump_ok = true;
    try {
      json(s).dump();  // strict: throws on invalid UTF-8
    } catch (const json::type_error&) {
      dump_ok = false;
    }
    const bool ok = append_json_string(out, s);
    ASSERT_EQ(ok, dump_ok) << "byte string #" << i;
    if (ok) {
      EXPECT_EQ(out, dumped(json(s)));
      ++valid;
    } else {
      EXPECT_TRUE(out.empty());
      EXPECT_EQ(written(false, "id", 1, "m", false, "", s), "<refused>");
      ++refused;
    }
  }
  EXPECT_GT(valid, 1000);
  EXPECT_GT(refused, 1000);
}

}  // namespace
}  // namespace sparkglm::server
