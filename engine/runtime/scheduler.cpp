#include "engine/runtime/scheduler.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/runtime/speculation/mtp_drafter.h"

namespace sparkglm {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point from) {
  return std::chrono::duration<double>(Clock::now() - from).count();
}
}  // namespace

Scheduler::Scheduler(ModelRunner& runner, const SchedulerLimits& limits,
                     std::unique_ptr<Drafter> drafter)
    : runner_(runner),
      limits_(limits),
      geometry_(runner.cache_geometry()),
      blocks_(geometry_.num_blocks) {
  limits_.validate(geometry_);
  for (int s = limits_.max_num_seqs - 1; s >= 0; --s) free_slots_.push_back(s);
  if (limits_.prefix_caching)
    cache_ = std::make_unique<PrefixCache>(
        blocks_, runner_,
        PrefixCacheOptions{geometry_.block_size, limits_.prefill_align, geometry_.num_snapshots,
                           limits_.snapshot_every_chunks, limits_.cache_identity,
                           limits_.prefix_cache_dir, limits_.prefix_cache_bytes});
  if (limits_.speculative_tokens > 0) {
    if (!drafter) drafter = std::make_unique<MtpDrafter>(runner_);
    spec_ = std::make_unique<Speculator>(
        limits_.speculative_tokens, limits_.speculative_rollback, std::move(drafter),
        runner_.config(), blocks_, geometry_.block_size, limits_.max_seq_len,
        [this](Sequence& s, const SampledToken& t) { emit_token(s, t); },
        limits_.speculative_draft_in_step, limits_.speculative_chain_in_step);
  }
}

SchedulerCounters Scheduler::counters() const {
  SchedulerCounters c = counters_;
  c.block_evictions = blocks_.evictions();
  if (spec_) c.speculation = spec_->counters();
  if (cache_) {
    const PrefixCacheCounters& p = cache_->counters();
    c.prefix_hits = p.hits;
    c.prefix_hit_tokens = p.hit_tokens;
    c.snapshots_saved = p.snapshots_saved;
    c.snapshot_evictions = p.snapshot_evictions;
    c.prefix = p;
  }
  return c;
}

int Scheduler::blocks_for(const Sequence& s) const {
  const int64_t remaining = int64_t(s.request.sampling.max_tokens) - s.generated();
  const int64_t tokens = std::min<int64_t>(
      int64_t(s.tokens.size()) + std::min<int64_t>(remaining, limits_.reserve_output_tokens),
      limits_.max_seq_len);
  return int((tokens + geometry_.block_size - 1) / geometry_.block_size);
}

void Scheduler::check_fits(const GenerationRequest& r) const {
  r.sampling.validate();
  if (r.constraint.active() && !r.grammar)
    throw Error(ErrorKind::kInvalidArgument,
                "an output constraint needs its compiled grammar (compile_output_constraint)");
  if (r.grammar && r.grammar->vocab_size() != runner_.config().vocab_size)
    throw Error(ErrorKind::kInvalidArgument,
                "the output grammar's vocabulary has " + std::to_string(r.grammar->vocab_size()) +
                    " ids, the model's " + std::to_string(runner_.config().vocab_size));
  if (r.prompt.empty()) throw Error(ErrorKind::kInvalidArgument, "the prompt is empty");
  const int vocab = runner_.config().vocab_size;
  for (int32_t t : r.prompt)
    if (t < 0 || t >= vocab)
      throw Error(ErrorKind::kInvalidArgument, "prompt token id " + std::to_string(t) +
                                                   " outside the vocabulary [0, " +
                                                   std::to_string(vocab) + ")");
  const int64_t want = int64_t(r.prompt.size()) + r.sampling.max_tokens;
  if (want > limits_.max_seq_len)
    throw Error(ErrorKind::kCapacity,
                "prompt (" + std::to_string(r.prompt.size()) + " tokens) + max_tokens (" +
                    std::to_string(r.sampling.max_tokens) + ") exceeds --max-seq-len " +
                    std::to_string(limits_.max_seq_len));
  const int64_t blocks = (want + geometry_.block_size - 1) / geometry_.block_size;
  if (blocks > geometry_.num_blocks)
    throw Error(ErrorKind::kCapacity,
                "prompt + max_tokens needs " + std::to_string(want) +
                    " tokens of KV cache; the whole pool holds " +
                    std::to_string(int64_t(geometry_.num_blocks) * geometry_.block_size));
}

void Scheduler::add(std::shared_ptr<RequestHandle> handle, GenerationRequest request) {
  check_fits(request);
  auto s = std::make_unique<Sequence>();
  s->handle = std::move(handle);
  s->tokens = request.prompt;
  s->prompt_len = int(request.prompt.size());
  s->request = std::move(request);
  waiting_.push_back(std::move(s));
}

void Scheduler::admit() {
  // A waiting request ends the answers that run (what they published stays published).
  bool ended = false;
  for (auto& s : running_)
    if (!waiting_.empty() && s->answer && s->finish == FinishReason::kNone) {
      finish(*s, FinishReason::kCancelled);
      ended = true;
    }
  if (ended) drop_finished();
  // First come, first served: later requests wait too.
  while (!waiting_.empty() && admit_front(waiting_)) {
  }
  // Answers run only while no request runs or waits, so that they slow none down. One whose
  // blocks do not fit now is dropped, as is one whose prompt snapshot is gone (it would prefill
  // the whole conversation) or whose end is cached.
  const bool requests_run =
      std::any_of(running_.begin(), running_.end(),
                  [](const std::unique_ptr<Sequence>& s) { return !s->answer; });
  while (waiting_.empty() && !requests_run && !answers_.empty() && !free_slots_.empty() &&
         int(running_.size()) < limits_.max_num_seqs) {
    Sequence& a = *answers_.front();
    const PrefixCache::Hit hit = cache_->find(a);
    const bool from_snapshot = hit.tokens > 0 || a.request.prompt.size() <= size_t(cache_->grid());
    const bool useful = hit.tokens < a.prefill_end() && from_snapshot;
    if (!useful || !admit_front(answers_)) answers_.pop_front();
  }
}

bool Scheduler::admit_front(std::deque<std::unique_ptr<Sequence>>& queue) {
  if (int(running_.size()) >= limits_.max_num_seqs || free_slots_.empty()) return false;
  Sequence& s = *queue.front();
  PrefixCache::Hit hit;
  if (cache_) hit = cache_->find(s);
  // The hit's blocks are reserved already; its idle and stored ones leave the free count when
  // taken. Headroom of one block per running sequence keeps a new admission from being
  // preempted by the next step's growth.
  const int need = blocks_for(s) - int(hit.blocks.size());
  const int headroom = running_.empty() ? 0 : int(running_.size());
  if (need + headroom > blocks_.num_free() - (cache_ ? cache_->free_blocks_taken(hit) : 0))
    return false;
  if (cache_) cache_->take(s, hit);
  for (int32_t b : blocks_.allocate(need)) s.blocks.push_back(b);
  s.slot = free_slots_.back();
  free_slots_.pop_back();
  // A preempted sequence keeps its sampler: penalties and draws continue where they were.
  if (!s.sampler && !s.answer)
    s.sampler.emplace(s.request.sampling, s.request.prompt, next_seed_++);
  if (!s.matcher && s.request.grammar) s.matcher.emplace(s.request.grammar);
  running_.push_back(std::move(queue.front()));
  queue.pop_front();
  return true;
}

void Scheduler::queue_answer(const Sequence& s) {
  const int end = cache_->answer_end(s);
  if (end == 0) return;
  auto a = std::make_unique<Sequence>();
  a->answer = true;
  a->request.cache_salt = s.request.cache_salt;
  a->request.prompt = s.request.prompt;  // its prompt's length says where its snapshot lies
  a->request.sampling.max_tokens = 0;
  a->tokens.assign(s.tokens.begin(), s.tokens.begin() + end);
  a->prompt_len = end;
  answers_.push_back(std::move(a));
  if (int(answers_.size()) > limits_.max_num_seqs) answers_.pop_front();
}

bool Scheduler::needs_preemption() const {
  const int bs = geometry_.block_size;
  int64_t missing = 0;
  for (const auto& sp : running_) {
    const Sequence& s = *sp;
    if (s.prefilling()) continue;
    const int64_t need = (int64_t(s.computed) + 1 + bs - 1) / bs;
    missing += std::max<int64_t>(0, need - int64_t(s.blocks.size()));
  }
  return missing > blocks_.num_free();
}

void Scheduler::grow_or_preempt() {
  const int bs = geometry_.block_size;
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence& s = *running_[i];
    if (s.prefilling()) continue;
    const size_t need =
        size_t((int64_t(s.computed) + 1 + bs - 1) / bs);  // covers position computed
    while (s.blocks.size() < need && i < running_.size()) {
      if (blocks_.num_free() > 0) {
        s.blocks.push_back(blocks_.allocate(1)[0]);
        continue;
      }
      // The newest goes; it may be `s` itself, which then leaves the loop with it.
      std::unique_ptr<Sequence> victim = std::move(running_.back());
      running_.pop_back();
      preempt(std::move(victim));
    }
  }
}

void Scheduler::release(Sequence& s) {
  if (s.slot >= 0) free_slots_.push_back(s.slot);
  s.slot = -1;
  blocks_.release_all(s.blocks);
  s.drafts.clear();  // no slot: nothing to verify or rewind
  s.draft_masks_made = 0;
  s.rewind_row = -1;
  s.spec_blocks = 0;
  if (cache_) cache_->drop(s);
}

void Scheduler::preempt(std::unique_ptr<Sequence> s) {
  SPARKGLM_ASSERT(s->queued_steps == 0, "scheduler: preempting a sequence with a step queued");
  release(*s);
  // An answer is dropped: it only saves later work.
  if (s->answer) return;
  s->computed = 0;  // recompute: prefill restarts at position 0, which resets the state slot
  ++counters_.preemptions;
  waiting_.push_front(std::move(s));  // it was admitted before everything still waiting
}

void Scheduler::finish(Sequence& s, FinishReason reason, const std::string& error) {
  s.finish = reason;
  release(s);
  if (s.answer) return;
  ++counters_.finished;
  RequestEvent e;
  e.finish = reason;
  e.error = error;
  e.prompt_tokens = s.prompt_len;
  e.cached_tokens = s.cached_tokens;
  e.completion_tokens = s.generated();
  e.time = Clock::now();
  if (s.request.on_event) s.request.on_event(e);
}

void Scheduler::reap_cancelled() {
  const auto now = Clock::now();
  auto reason_of = [&](const Sequence& s) {
    if (s.handle && s.handle->cancelled()) return FinishReason::kCancelled;
    if (now >= s.request.deadline) return FinishReason::kTimeout;
    return FinishReason::kNone;
  };
  for (auto& s : waiting_)
    if (auto r = reason_of(*s); r != FinishReason::kNone) finish(*s, r);
  for (auto& s : running_)
    if (auto r = reason_of(*s); r != FinishReason::kNone) finish(*s, r);
  auto done = [](const std::unique_ptr<Sequence>& s) { return s->finish != FinishReason::kNone; };
  waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(), done), waiting_.end());
  drop_finished();
}

void Scheduler::drop_finished() {
  auto kept = running_.begin();
  for (auto& s : running_) {
    if (s->finish == FinishReason::kNone) {
      *kept++ = std::move(s);
    } else if (s->queued_steps > 0) {
      queued_.back().retired.push_back(std::move(s));  // the newest step holding it ends last
    }
  }
  running_.erase(kept, running_.end());
}

void Scheduler::emit_token(Sequence& s, const SampledToken& t) {
  const ModelConfig& c = runner_.config();
  if (s.matcher && !s.matcher->accept_token(t.token))
    throw Error(ErrorKind::kInvalidArgument,
                "the output grammar refused token " + std::to_string(t.token));
  s.sampler->accept(t.token);
  s.tokens.push_back(t.token);
  ++counters_.generated_tokens;
  const SamplingParams& p = s.request.sampling;
  FinishReason reason = FinishReason::kNone;
  if (s.sampler->is_stop(t.token, c.eos_token_ids)) {
    reason = FinishReason::kStop;
  } else if (s.generated() >= p.max_tokens || int(s.tokens.size()) >= limits_.max_seq_len) {
    reason = FinishReason::kLength;
  }
  RequestEvent e;
  e.tokens.push_back({t.token, t.logprob, t.top_logprobs});
  e.prompt_tokens = s.prompt_len;
  e.cached_tokens = s.cached_tokens;
  e.completion_tokens = s.generated();
  e.time = Clock::now();
  if (reason == FinishReason::kNone) {
    if (s.request.on_event) s.request.on_event(e);
    return;
  }
  // The last token and the finish travel in one event.
  e.finish = reason;
  s.finish = reason;
  if (cache_) queue_answer(s);
  release(s);
  ++counters_.finished;
  if (s.request.on_event) s.request.on_event(e);
}

std::vector<std::pair<Sequence*, int>> Scheduler::prefill_grants() const {
  // Each prefilling sequence is offered an equal share of the budget first (whole chunks, at
  // least one), then what is left goes in order: a long prompt ahead of a short one no longer
  // holds all of every step's budget until it is done, so the short one's first token waits for
  // a share, not for the long prefill. An answer prefills one chunk a step: a request that
  // arrives waits for no more than that.
  const int align = limits_.prefill_align;
  std::vector<std::pair<Sequence*, int>> grants;  // (sequence, tokens it wants) until granted
  for (const auto& sp : running_)
    if (sp->prefilling()) {
      const int want = sp->prefill_end() - sp->computed;
      grants.emplace_back(sp.get(), sp->answer ? std::min(want, align) : want);
    }
  if (grants.empty()) return grants;
  std::vector<int> want(grants.size());
  for (size_t i = 0; i < grants.size(); ++i) want[i] = grants[i].second;
  int budget = limits_.max_prefill_tokens;
  const int share = std::max(align, budget / int(grants.size()) / align * align);
  for (size_t i = 0; i < grants.size(); ++i) {
    grants[i].second = std::min({want[i], share, budget});
    budget -= grants[i].second;
  }
  for (size_t i = 0; i < grants.size() && budget > 0; ++i) {
    const int more = std::min(want[i] - grants[i].second, budget);
    grants[i].second += more;
    budget -= more;
  }
  return grants;
}

Scheduler::QueuedStep Scheduler::build_step(ForwardBatch& batch, StepSampling& sampling) {
  QueuedStep q;
  std::vector<const GrammarMatcher*> masked;  // members whose picks the runner masks
  // `logits`: the member's logit rows, its last ones (a speculative member's; others have one
  // where they sample).
  auto add_member = [&](Sequence& s, int rows, bool samples, SpecRole role, int logits) {
    q.members.push_back(&s);
    q.rows.push_back(rows);
    // Write protection (prefix_cache.h): every block these rows write is this sequence's alone.
    const int bs = geometry_.block_size;
    for (int i = s.computed / bs; i <= (s.computed + rows - 1) / bs; ++i)
      SPARKGLM_ASSERT(
          blocks_.ref_count(s.blocks[size_t(i)]) == 1 && !blocks_.cached(s.blocks[size_t(i)]),
          "scheduler: a step would write a shared or published KV block");
    q.role.push_back(role);
    if (role != SpecRole::kNone) {  // logits and hidden states for the speculator
      q.logit_row.push_back(logits > 0 ? int(batch.logit_rows.size()) - logits : -1);
      q.picked.push_back(0);
      q.all_picked = false;
      for (int i = 0; i < logits; ++i) {
        sampling.picked.push_back(0);
        sampling.draws.push_back(s.sampler->row_draw(s.generated()));
        sampling.mask_row.push_back(-1);
      }
      return;
    }
    const int logit_row = samples ? int(batch.logit_rows.size()) - 1 : -1;
    q.logit_row.push_back(logit_row);
    // The output index this row's token will have: one more while a token is still pending.
    const int index = s.generated() + (s.pending_row >= 0);
    const bool picked = samples && (runner_.draws_sampled() ? s.sampler->plain_draw_at(index)
                                                            : s.sampler->plain_greedy_at(index));
    q.picked.push_back(picked);
    if (samples) {
      sampling.picked.push_back(picked);
      sampling.draws.push_back(s.sampler->row_draw(index));
      // A constrained row's next mask needs this row's token: its step is collected before the
      // next one is built (constrained sequences are not pipelined). The runner applies the mask
      // of a row it picks (StepSampling::fill_masks), the host sampler that of any other row.
      q.all_picked = q.all_picked && picked && !s.matcher;
      sampling.mask_row.push_back(picked && s.matcher ? int32_t(masked.size()) : -1);
      if (picked && s.matcher) masked.push_back(&*s.matcher);
    }
  };
  // Decode rows first (they are latency bound), rotating when there are more than fit.
  const size_t n = running_.size();
  int decode_rows = 0;
  for (size_t i = 0; i < n && decode_rows < limits_.max_batch_size; ++i) {
    Sequence& s = *running_[(decode_cursor_ + i) % n];
    if (s.prefilling()) continue;
    if (spec_ && spec_->applies_to(s)) {
      const int rows = spec_->add_verify_slice(s, batch);
      add_member(s, rows, true, SpecRole::kVerify, rows);
      if (s.drafts_from_chain >= 0) {  // drafts the queued step is chaining on the device
        const int first = int(batch.tokens.size() - s.drafts.size());
        sampling.chain_from.resize(batch.tokens.size(), -1);
        for (int j = 0; j < int(s.drafts.size()); ++j)
          sampling.chain_from[size_t(first + j)] = s.drafts_from_chain + j;
      }
      ++decode_rows;
      continue;
    }
    if (s.pending_row >= 0) {
      // Its token is still in flight: skip it when that token must end it by length.
      if (s.generated() + 1 >= s.request.sampling.max_tokens ||
          int(s.tokens.size()) + 1 >= limits_.max_seq_len)
        continue;
      sampling.token_from.resize(batch.tokens.size(), -1);
      sampling.token_from.push_back(s.pending_row);
      batch.add_sequence({0}, s.computed, s.slot, s.blocks);
    } else {
      batch.add_sequence({s.tokens.back()}, s.computed, s.slot, s.blocks);
    }
    add_member(s, 1, true, SpecRole::kNone, 1);
    ++decode_rows;
  }
  decode_cursor_ = n ? (decode_cursor_ + size_t(decode_rows)) % n : 0;
  // A step of prompt rows alone runs the MTP module over them inside it (StepSampling::mtp_next):
  // a speculative member then brings back its last row alone, where it samples or drafts.
  q.prompt_drafts =
      spec_ && spec_->drafts_in_step() && decode_rows == 0 && runner_.drafts_over_prompts();
  for (const auto& [sp, grant] : prefill_grants()) {
    Sequence& s = *sp;
    if (grant <= 0) continue;
    const int start = s.computed;
    const int prefill_end = s.prefill_end();
    int end = std::min(prefill_end, start + grant);
    if (end < prefill_end) {
      // Split only on the KDA chunk grid so the arithmetic matches an unshared prefill.
      const int aligned = end / limits_.prefill_align * limits_.prefill_align;
      if (aligned <= start) continue;  // this step's leftover budget cannot reach the next boundary
      end = aligned;
    }
    if (cache_) end = cache_->cap_prefill(s, start, end);  // a snapshot save point (on the grid)
    // Only a first prefill samples; a recomputed one ends where the next decode step takes over.
    const bool sample = end == prefill_end && s.generated() == 0 && !s.answer;
    const bool spec = spec_ && spec_->applies_to(s);  // every row's hidden state for the drafter
    // With prompt drafts, a speculative prompt recomputed up to its last token (after a
    // preemption) brings back that row too: the next drafts start there.
    const bool last = sample || (q.prompt_drafts && spec && end + 1 == int(s.tokens.size()));
    batch.add_sequence({s.tokens.begin() + start, s.tokens.begin() + end}, start, s.slot, s.blocks,
                       last, spec && !q.prompt_drafts);
    batch.seqs.back().decode = false;  // a one-row piece of a prompt is still prefill
    if (q.prompt_drafts) {             // each row's next token; -1: the row's pick (it samples)
      for (int p = start + 1; p < end; ++p) sampling.mtp_next.push_back(s.tokens[size_t(p)]);
      // A prefix-cache answer's last row has no next token: token 0, its drafts unused.
      sampling.mtp_next.push_back(sample                       ? -1
                                  : end < int(s.tokens.size()) ? s.tokens[size_t(end)]
                                                               : 0);
    }
    add_member(s, end - start, sample,
               !spec    ? SpecRole::kNone
               : sample ? SpecRole::kSampleLast
                        : SpecRole::kObserve,
               !spec || !q.prompt_drafts ? end - start : int(last));
    if (cache_) cache_->mark_slice(s, batch.seqs.back(), start, end);
    if (!s.answer) counters_.prompt_tokens += uint64_t(end - start);
  }
  // Not for prompts alone that draft nothing (requests without speculation).
  if (std::none_of(q.role.begin(), q.role.end(), [](SpecRole r) { return r != SpecRole::kNone; }))
    q.prompt_drafts = false;
  if (!q.prompt_drafts) sampling.mtp_next.clear();
  if (!sampling.token_from.empty()) sampling.token_from.resize(batch.tokens.size(), -1);
  if (!sampling.chain_from.empty()) sampling.chain_from.resize(batch.tokens.size(), -1);
  // A step of verify slices only, every row a logit row (no replayed rows): the runner may run
  // the drafter's MTP rows inside it (speculator.h).
  sampling.draft_on_picks = spec_ && spec_->drafts_in_step() && !q.role.empty() &&
                            std::all_of(q.role.begin(), q.role.end(),
                                        [](SpecRole r) { return r == SpecRole::kVerify; }) &&
                            batch.logit_rows.size() == size_t(batch.num_rows());
  // And the whole chain of drafts when every member can take it, in small steps
  // (SchedulerLimits::speculative_chain_slices).
  sampling.draft_chain = 0;
  if (sampling.draft_on_picks && q.members.size() <= size_t(limits_.speculative_chain_slices)) {
    int passes = spec_->tokens();
    for (const Sequence* s : q.members) passes = std::min(passes, spec_->chain_passes(*s));
    sampling.draft_chain = passes;
    // Its main rows can be committed before its chains arrive (commit_early).
    q.early = passes > 0 && runner_.main_rows_early();
  }
  if (masked.empty()) {
    sampling.mask_row.clear();
  } else {
    // Called by the runner once the step's forward is launched (or run); the matchers stay as
    // they are until this step is collected.
    sampling.mask_words = masked[0]->mask_words();
    sampling.fill_masks = [masked, words = size_t(sampling.mask_words)](uint32_t* dst) {
      for (size_t i = 0; i < masked.size(); ++i) masked[i]->fill_mask(dst + i * words);
    };
  }
  return q;
}

bool Scheduler::step() {
  reap_cancelled();
  // The queued step stays in flight while this one is built only when this one can read its
  // tokens on the device and no sequence must be preempted (a preempted sequence must have no
  // row in flight): otherwise it is collected first.
  if (!queued_.empty() &&
      (!(queued_.back().all_picked || queued_.back().committed) || needs_preemption()))
    collect_oldest();
  grow_or_preempt();  // before admission: running sequences have the first claim on free blocks
  admit();

  ForwardBatch batch;
  StepSampling sampling;
  QueuedStep q = build_step(batch, sampling);
  if (q.members.empty()) {
    if (queued_.empty()) return false;
    collect_oldest();
    return true;
  }
  try {
    const auto submit_from = Clock::now();
    runner_.submit(batch, sampling);
    counters_.host.submit_seconds += seconds_since(submit_from);
  } catch (const std::exception& e) {
    // A failed step fails its requests, never the server; a device fault fails the device, and
    // goes to the engine (which cancels everything through cancel_all).
    if (is_device_fatal(e)) throw;
    if (cache_) cache_->clear();  // what this step published was never written
    for (Sequence* s : q.members) finish(*s, FinishReason::kError, e.what());
    drop_finished();
    if (!queued_.empty()) collect_oldest();
    return true;
  }
  q.submitted = Clock::now();
  for (size_t i = 0; i < q.members.size(); ++i) {
    Sequence& s = *q.members[i];
    s.computed += q.rows[i];
    ++s.queued_steps;
    if (q.logit_row[i] >= 0) s.pending_row = q.logit_row[i];
  }
  queued_.push_back(std::move(q));
  if (queued_.size() > 1) collect_oldest();  // step N-1, while step N runs
  if (!queued_.empty() && queued_.back().early) commit_early();
  return true;
}

void Scheduler::commit_early() {
  QueuedStep& q = queued_.back();
  try {
    const auto collect_from = Clock::now();
    runner_.collect_main(q.main);
    counters_.host.collect_seconds += seconds_since(collect_from);
  } catch (const std::exception& e) {
    if (is_device_fatal(e)) throw;
    collect_oldest();  // which fails its members with what the step threw
    return;
  }
  if (q.main.draft_chain_width == 0) {  // no chain ran (the runner could not lay it out)
    collect_oldest();
    return;
  }
  bool pipelined = true;
  for (size_t i = 0; i < q.members.size(); ++i) {
    Sequence& s = *q.members[i];
    if (s.finish != FinishReason::kNone) continue;  // cancelled while queued
    s.pending_row = -1;                             // its tokens are known from here on
    try {
      pipelined = spec_->commit_main(s, q.rows[i], q.logit_row[i], q.main, int(running_.size())) &&
                  pipelined;
    } catch (const std::exception& e) {
      finish(s, FinishReason::kError, e.what());
    }
  }
  q.committed = true;
  // A sequence the chain was not its drafter's for is drafted by the drafter, with no step queued.
  if (!pipelined) collect_oldest();
}

void Scheduler::collect_oldest() {
  QueuedStep q = std::move(queued_.front());
  queued_.pop_front();
  StepResult result;
  std::string failure;
  try {
    const auto collect_from = Clock::now();
    runner_.collect(result);
    counters_.host.collect_seconds += seconds_since(collect_from);
  } catch (const std::exception& e) {
    if (is_device_fatal(e)) throw;  // the engine's to handle, as in step()
    failure = e.what();
    if (cache_) cache_->clear();
  }
  // collect_main moved the main rows out (a step it was not committed from).
  if (!q.main.tokens.empty() && !q.committed) result.take_main_rows(q.main);
  const ModelConfig& c = runner_.config();
  const int64_t vocab = c.vocab_size;
  std::vector<uint32_t> mask;  // a constrained member's allowed tokens
  for (size_t i = 0; i < q.members.size(); ++i) {
    Sequence& s = *q.members[i];
    --s.queued_steps;
    const int row = q.logit_row[i];
    if (s.queued_steps == 0) s.pending_row = -1;    // its token is known from here on
    if (s.finish != FinishReason::kNone) continue;  // finished while queued: a wasted row
    if (s.answer && failure.empty()) {
      if (!s.prefilling()) finish(s, FinishReason::kStop);  // its last slice is in
      continue;
    }
    if (!failure.empty()) {
      finish(s, FinishReason::kError, failure);
      continue;
    }
    if (q.committed) continue;  // commit_early committed it
    if (q.role[i] != SpecRole::kNone) {
      try {
        if (q.prompt_drafts) {
          spec_->commit_prompt(s, q.role[i], row, result);
        } else {
          spec_->commit(s, q.role[i], q.rows[i], row, result);
        }
      } catch (const std::exception& e) {
        finish(s, FinishReason::kError, e.what());
      }
      continue;
    }
    if (row < 0) continue;
    try {
      SampledToken t;
      if (q.picked[i]) {
        t.token = result.tokens.at(size_t(row));
        if (t.token < 0)
          throw Error(ErrorKind::kInvalidArgument,
                      "no token can be drawn: every logit is NaN or -inf");
      } else {
        const uint32_t* allowed = s.matcher ? s.matcher->fill_mask(mask) : nullptr;
        t = s.sampler->sample(result.logits.data() + int64_t(row) * vocab, vocab, c.eos_token_ids,
                              allowed);
      }
      emit_token(s, t);
    } catch (const std::exception& e) {
      finish(s, FinishReason::kError, e.what());  // e.g. every logit masked or NaN
    }
  }
  if (spec_ && q.committed) spec_->take_chains(result);  // its members are finished if it failed
  if (spec_ && failure.empty()) {
    const auto draft_from = Clock::now();
    // Nothing is queued now, or the step was committed early with every draft from its chain
    // (commit_early): then the drafter has nothing to draft.
    spec_->draft(int(running_.size()));
    counters_.host.draft_seconds += seconds_since(draft_from);
  }
  drop_finished();
  // A step's time is what it added to the pipeline: from its submission or the previous
  // collection, whichever came later, to its own collection.
  const auto now = Clock::now();
  const auto from = std::max(q.submitted, last_collect_);
  last_collect_ = now;
  ++counters_.steps;
  counters_.last_step_seconds = std::chrono::duration<double>(now - from).count();
  counters_.total_step_seconds += counters_.last_step_seconds;
}

void Scheduler::cancel_all(FinishReason reason, const std::string& error) {
  // Queued steps are collected (the runner's queue must drain) and their results dropped.
  for (; !queued_.empty(); queued_.pop_front()) {
    StepResult ignored;
    try {
      runner_.collect(ignored);
    } catch (const std::exception&) {
    }
    for (Sequence* s : queued_.front().members) s->queued_steps = 0, s->pending_row = -1;
  }
  if (spec_) spec_->drop_pending();
  for (auto& s : waiting_) finish(*s, reason, error);
  for (auto& s : running_)
    if (s->finish == FinishReason::kNone) finish(*s, reason, error);
  waiting_.clear();
  running_.clear();
  answers_.clear();
}

}  // namespace sparkglm
