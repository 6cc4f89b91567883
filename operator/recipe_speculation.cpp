#include "operator/recipe_speculation.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "engine/runtime/speculation/speculator.h"

namespace sparkglm::operator_tool {

namespace {

using Kind = SpeculativeFlag::Kind;

constexpr const char* kOwnHead = "SparkGLM drafts with the model's own MTP module only";
constexpr size_t kMaxConfigBytes = 4096;  // a --speculative-config object is a few keys

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::optional<int64_t> count_of(const std::optional<std::string>& value) {
  if (!value || value->empty() || value->size() > 6 ||
      !std::all_of(value->begin(), value->end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(*value);
}

// k drafts as --speculative-tokens, or why not.
SpeculativeFlag drafts(std::optional<int64_t> k, const std::string& what) {
  if (!k) return {Kind::kUnsupported, what + " is not a count of draft tokens"};
  if (*k > kMaxSpeculativeTokens)
    return {Kind::kUnsupported, std::to_string(*k) + " draft tokens: SparkGLM chains at most " +
                                    std::to_string(kMaxSpeculativeTokens) +
                                    " (--speculative-tokens 0.." +
                                    std::to_string(kMaxSpeculativeTokens) + ")"};
  return {Kind::kSet, std::to_string(*k)};
}

SpeculativeFlag from_config(const std::optional<std::string>& value) {
  if (!value || value->size() > kMaxConfigBytes)
    return {Kind::kUnsupported, "expected a JSON object of at most 4096 bytes"};
  const nlohmann::json j = nlohmann::json::parse(*value, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return {Kind::kUnsupported, "not a JSON object"};
  const auto m = j.find("method");
  if (m != j.end() && !m->is_string()) return {Kind::kUnsupported, "method: expected a string"};
  const std::string method = m != j.end() ? lower(m->get<std::string>()) : std::string();
  if (!method.empty() && method.find("mtp") == std::string::npos)
    return {Kind::kUnsupported, "method " + method + ": " + kOwnHead};
  const auto n = j.find("num_speculative_tokens");
  if (n == j.end() || !n->is_number_unsigned())
    return {Kind::kUnsupported, "names no num_speculative_tokens"};
  return drafts(n->get<int64_t>(), "num_speculative_tokens");
}

}  // namespace

SpeculativeFlag speculative_flag(const std::string& name, const std::optional<std::string>& v) {
  if (name == "num-speculative-tokens" || name == "speculative-num-steps")
    return drafts(count_of(v), v.value_or("(no value)"));
  if (name == "speculative-num-draft-tokens") {  // with top-1 drafts: the steps and the root
    const auto n = count_of(v);
    if (n && *n == 0) return {Kind::kUnsupported, "0 draft tokens leave no root"};
    return drafts(n ? std::optional<int64_t>(*n - 1) : std::nullopt, v.value_or("(no value)"));
  }
  if (name == "speculative-config") return from_config(v);
  if (name == "speculative-algorithm") {
    const std::string a = lower(v.value_or(""));
    if (a == "nextn" || a == "mtp" || a == "eagle")
      return {Kind::kNote,
              "drafting with the model's MTP head, as SparkGLM does; the number of "
              "drafts comes from the steps (--speculative-tokens)"};
    return {Kind::kUnsupported, "algorithm " + a + ": " + kOwnHead};
  }
  if (name == "speculative-eagle-topk") {
    if (v && *v == "1") return {Kind::kNote, "top-1 drafts: a chain, as SparkGLM drafts"};
    return {Kind::kUnsupported, "SparkGLM drafts a chain (top 1), not a tree"};
  }
  if (name.rfind("dflash", 0) == 0 || name == "draft-model" ||
      name.rfind("speculative-draft", 0) == 0 || name == "speculative-model")
    return {Kind::kUnsupported,
            std::string("speculative decoding with a separate drafter (DFlash2, a draft model) "
                        "is not implemented: ") +
                kOwnHead + " (--speculative-tokens)"};
  if (name == "mtp-gate")
    return {Kind::kUnsupported,
            "no MTP gate: with --speculative-tokens k every step drafts for every request that "
            "allows it (no disable_mtp, no output grammar)"};
  if (name.rfind("speculative", 0) == 0)
    return {Kind::kUnsupported,
            std::string("no SparkGLM counterpart: ") + kOwnHead + " (--speculative-tokens)"};
  return {};
}

}  // namespace sparkglm::operator_tool
