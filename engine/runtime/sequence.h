#pragma once
// One request inside the scheduler: its tokens, how many are in the caches, its blocks, its state
// slot and its sampler.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/runtime/generation_request.h"
#include "engine/runtime/sampler.h"
#include "engine/text/grammar/grammar_matcher.h"

namespace sparkglm {

struct Sequence {
  std::shared_ptr<RequestHandle> handle;
  GenerationRequest request;
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int prompt_len = 0;
  int computed = 0;             // tokens whose KV/state are in the caches
  int slot = -1;                // KDA state slot while admitted
  std::vector<int32_t> blocks;  // latent-cache block table while admitted
  std::optional<SequenceSampler> sampler;
  // Where the output is in the request's grammar (request.grammar set); kept across preemption.
  std::optional<GrammarMatcher> matcher;
  FinishReason finish = FinishReason::kNone;
  // Pipelining (scheduler.h): steps queued in the runner that hold a row of this sequence, and
  // the logit row of the newest one whose token comes next (-1: none pending).
  int queued_steps = 0;
  int pending_row = -1;
  // Prefix cache (engine/runtime/prefix_cache.h), while admitted: the keys of the full blocks of
  // the prefill, how many of its blocks are published, positions where a KDA snapshot is to be
  // saved (ascending), and a pinned snapshot still to restore into the slot (-1: none).
  std::vector<uint64_t> block_keys;
  int published_blocks = 0;
  std::vector<int> save_points;
  int restore_snapshot = -1;
  int cached_tokens = 0;  // the hit of its first admission, for usage reporting
  // A finished conversation prefilled once more to publish its answer (prefix_cache.h: Answers):
  // no request, no sampling, no events; it ends when its prefill is done.
  bool answer = false;
  // Speculative decoding (engine/runtime/speculation/speculator.h), while admitted: the drafts
  // its next verify slice checks, the recorded row its KDA state resumes from (-1: none), and
  // how many blocks at the end of its table were taken for draft positions only.
  std::vector<int32_t> drafts;
  // Drafts still on the device (the verify step pipelined, speculator.h): drafts holds
  // placeholders, and the first is entry drafts_from_chain of the queued step's draft_chain
  // (StepSampling::chain_from); -1 once they are known.
  int32_t drafts_from_chain = -1;
  int rewind_row = -1;
  int spec_blocks = 0;
  // With an output grammar: the masks the drafter drafted under (draft_masks[i] before drafts[i],
  // the first draft_masks_made of them current), which are the masks the verify rows need.
  std::vector<std::vector<uint32_t>> draft_masks;
  int draft_masks_made = 0;

  int generated() const { return int(tokens.size()) - prompt_len; }
  // Prefill covers the prompt; after a preemption, every token but the last (whose KV the next
  // decode step computes, as for any sampled token).
  int prefill_end() const { return generated() == 0 ? prompt_len : int(tokens.size()) - 1; }
  bool prefilling() const { return computed < prefill_end(); }
};

}  // namespace sparkglm
