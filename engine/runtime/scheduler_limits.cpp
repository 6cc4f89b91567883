// SchedulerLimits::validate (scheduler.h): a bad user limit is an error naming its option.
#include <string>

#include "engine/core/error.h"
#include "engine/runtime/scheduler.h"
#include "engine/runtime/speculation/speculative_rollback.h"

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
  if (speculative_chain_slices < 1)
    bad_limit("chain-slices", "at least 1", speculative_chain_slices);
  const int records = speculative_state_records(speculative_tokens, speculative_rollback);
  if (g.state_records < records)
    bad_limit("speculative-tokens",
              std::string("a runner with ") + std::to_string(records) +
                  " KDA state records per slot (--speculative-rollback " +
                  speculative_rollback_name(speculative_rollback) + "; this runner keeps " +
                  std::to_string(g.state_records) + ")",
              speculative_tokens);
}

}  // namespace sparkglm
