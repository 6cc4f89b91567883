#pragma once
// Other engines' speculative-decoding flags in a recipe, as SparkGLM's one: --speculative-tokens k
// (the model's own MTP module drafts a chain of k <= 4 tokens; nothing else drafts).
//   vLLM:   --num-speculative-tokens N; --speculative-config '{"method": "mtp", ...,
//           "num_speculative_tokens": N}' (method mtp, deepseek_mtp, glm4_moe_mtp, ...: any
//           *mtp* method, or none)
//   SGLang: --speculative-algorithm NEXTN|MTP|EAGLE (EAGLE drafts with the MTP head on models
//           that have one), --speculative-num-steps N, --speculative-num-draft-tokens N + 1,
//           --speculative-eagle-topk 1
// Separate drafters (DFlash2, draft models, n-gram, EAGLE-3 heads) and trees (topk > 1) have no
// counterpart and are listed with the reason.
#include <optional>
#include <string>

namespace sparkglm::operator_tool {

struct SpeculativeFlag {
  enum class Kind {
    kOther,        // not a speculative-decoding flag
    kSet,          // --speculative-tokens `text`
    kNote,         // accepted, nothing to set: `text` says why
    kUnsupported,  // `text` says why
  };
  Kind kind = Kind::kOther;
  std::string text;
};

// `name` without its dashes; `value` as written (absent for a bare flag).
SpeculativeFlag speculative_flag(const std::string& name, const std::optional<std::string>& value);

}  // namespace sparkglm::operator_tool
