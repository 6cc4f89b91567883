#pragma once
// The one way this project parses JSON: every document it reads (a request body, JSON inside a
// request string, config.json, tokenizer.json, a recipe, a profile, a receipt, a workload or gate,
// an operator state file, a server's reply) goes through parse_json() with the limits of its kind.
//
// Why: nlohmann's parser is iterative and its destructor flattens deep values without recursion,
// but dump(), operator==, copies and this project's own walkers (the chat template, the verifiers)
// recurse once per level, so a 40 KB document of `[[[[...` overflows the stack. The size and the
// depth are therefore checked by a linear, non-recursive scan of the bytes BEFORE anything is
// parsed, and a violation is an Error of the caller's kind naming the limit:
//   "<where>: JSON larger than N bytes (got M)" / "<where>: JSON nested deeper than N levels".
// Depth counts open arrays and objects: `1` is depth 0, `[1]` depth 1, `{"a": [1]}` depth 2.
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"

namespace sparkglm {

struct JsonLimits {
  size_t max_bytes;
  int max_depth;
};

// The limits per kind of input. Sizes are backstops above what any legitimate file holds (a
// transport limit, like the server's body cap or the recipe fetch cap, usually applies first);
// depths are a few times what the deepest legitimate document nests.
namespace json_limits {
constexpr size_t kMiB = size_t(1) << 20;
// An HTTP request body: --max-body-bytes (at most 4 GiB) is the configurable size limit.
inline constexpr JsonLimits kRequestBody{4096 * kMiB, 64};
// JSON carried inside a request string (tool_calls[].function.arguments): the chat template
// renders it recursively.
inline constexpr JsonLimits kRequestEmbedded{4096 * kMiB, 64};
inline constexpr JsonLimits kModelConfig{4 * kMiB, 16};  // a checkpoint's config.json
// model.safetensors.index.json: one line per tensor, a few MB for the full model.
inline constexpr JsonLimits kCheckpointIndex{64 * kMiB, 16};
// A .safetensors header nests three deep (header, tensor, shape); its length is capped at 100 MB.
inline constexpr JsonLimits kSafetensorsHeader{100'000'000, 8};
// tokenizer.json is large (a 150K-token vocabulary and its merges: tens of MB) but shallow.
inline constexpr JsonLimits kTokenizer{512 * kMiB, 32};
inline constexpr JsonLimits kRecipe{16 * kMiB, 32};  // fetched recipes are capped at 1 MiB first
inline constexpr JsonLimits kProfile{16 * kMiB, 32};
// Bundle files: qualification.json, operators.json, index.json.
inline constexpr JsonLimits kReceipt{256 * kMiB, 64};
inline constexpr JsonLimits kWorkload{64 * kMiB, 32};
inline constexpr JsonLimits kGate{16 * kMiB, 32};
inline constexpr JsonLimits kOperatorState{16 * kMiB, 32};  // engine.json and kin
// A rank's fingerprint in the rendezvous (rank_bootstrap.cpp): key, then settings, then values;
// the frame itself is capped at 1 MiB.
inline constexpr JsonLimits kRankFingerprint{1 * kMiB, 8};
// What a server under test answers (the harness's replies, SSE chunks, /v1/models).
inline constexpr JsonLimits kServerReply{256 * kMiB, 64};
}  // namespace json_limits

// Throws Error(kind, ...) when `bytes` is over the size or depth limit; parses nothing.
void check_json_bounds(std::string_view bytes, const std::string& where, ErrorKind kind,
                       JsonLimits limits);

// Bounds first, then the parse. A syntax error is Error(kind, "<where>: not valid JSON: ...").
nlohmann::json parse_json(std::string_view bytes, const std::string& where, ErrorKind kind,
                          JsonLimits limits);
// The same, keeping each object's keys in the order written (for text shown back or rendered).
nlohmann::ordered_json parse_ordered_json(std::string_view bytes, const std::string& where,
                                          ErrorKind kind, JsonLimits limits);

// For files people write (profiles, receipts): a key repeated within one object is also an error,
// Error(kind, "<where>: key \"k\" appears twice"), where a plain parse would keep one of the
// values. Most of these are bundle files, hence the default.
nlohmann::json parse_json_unique_keys(std::string_view bytes, const std::string& where,
                                      ErrorKind kind, JsonLimits limits = json_limits::kReceipt);

// The bytes of a JSON file, refused before any is read when the file is not a regular file (a FIFO
// would block the open, /dev/zero never ends) or is over limits.max_bytes: Error(kind, "<path>: N
// bytes, larger than the limit of M"). Error(kIo) when it cannot be read. A file that grows while
// it is read yields no more than the size it had when checked.
std::string read_json_text(const std::string& path, ErrorKind kind, JsonLimits limits);

// read_json_text, then parse_json with the path as `where`.
nlohmann::json parse_json_file(const std::string& path, ErrorKind kind, JsonLimits limits);

}  // namespace sparkglm
