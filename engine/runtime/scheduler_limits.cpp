// SchedulerLimits::validate (scheduler.h): a bad user limit is an error naming its option.
#include <string>

#include "engine/core/error.h"
#include "engine/runtime/scheduler.h"

namespace sparkglm {

namespace {
[[noreturn]] void bad_limit(const std::string& name, const std::string& expected, int64_t got) {
  throw Error(ErrorKind::kInvalidArgument,
              "--" + name + ": expected " + expected + ", got " + std::to_string(got));
}
}  // namespace

void SchedulerLimits::validate(const CacheGeometry& g) const {
  if (max_num_seqs < 1 || max_num_seqs > g.num_state_slots)
    bad_limit("max-num-seqs", "1.." + std::to_string(g.num_state_slots) + " (the KDA state slots)",
              max_num_seqs);
  if (max_batch_size < 1) bad_limit("max-batch-size", "at least 1", max_batch_size);
  SPARKGLM_ASSERT(prefill_align >= 1, "SchedulerLimits::prefill_align below 1");
  SPARKGLM_ASSERT(reserve_output_tokens >= 1, "SchedulerLimits::reserve_output_tokens below 1");
  if (max_prefill_tokens < prefill_align)
    bad_limit("max-prefill-tokens",
              "at least " + std::to_string(prefill_align) + " (one KDA chunk)", max_prefill_tokens);
  if (max_seq_len < 2) bad_limit("max-seq-len", "at least 2", max_seq_len);
  if (speculative_tokens < 0 || speculative_tokens > kMaxSpeculativeTokens)
    bad_limit("speculative-tokens", "0.." + std::to_string(kMaxSpeculativeTokens),
              speculative_tokens);
  if (speculative_tokens > 0 && g.state_records < speculative_tokens + 1)
    bad_limit("speculative-tokens",
              "at most " + std::to_string(g.state_records - 1) +
                  " (this runner records the KDA state of " + std::to_string(g.state_records) +
                  " rows per slot; a verify step needs k + 1)",
              speculative_tokens);
}

}  // namespace sparkglm
