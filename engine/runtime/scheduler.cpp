#include "engine/runtime/scheduler.h"

#include <algorithm>
#include <string>

#include "engine/core/error.h"

namespace sparkglm {

namespace {
using Clock = std::chrono::steady_clock;

[[noreturn]] void bad_limit(const std::string& name, const std::string& expected, int64_t got) {
  throw Error(ErrorKind::kInvalidArgument,
              "--" + name + ": expected " + expected + ", got " + std::to_string(got));
}
}  // namespace

const char* to_string(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kTimeout:
      return "timeout";
    case FinishReason::kError:
      return "error";
  }
  return "?";
}

void SchedulerLimits::validate(const CacheGeometry& g) const {
  if (max_num_seqs < 1 || max_num_seqs > g.num_state_slots)
    bad_limit("max-num-seqs", "1.." + std::to_string(g.num_state_slots) + " (the KDA state slots)",
              max_num_seqs);
  if (max_batch_size < 1) bad_limit("max-batch-size", "at least 1", max_batch_size);
  if (prefill_align < 1) bad_limit("prefill-align", "at least 1", prefill_align);
  if (max_prefill_tokens < prefill_align)
    bad_limit("max-prefill-tokens",
              "at least " + std::to_string(prefill_align) + " (one KDA chunk)", max_prefill_tokens);
  if (max_seq_len < 2) bad_limit("max-seq-len", "at least 2", max_seq_len);
  if (reserve_output_tokens < 1)
    bad_limit("reserve-output-tokens", "at least 1", reserve_output_tokens);
}

Scheduler::Scheduler(ModelRunner& runner, const SchedulerLimits& limits)
    : runner_(runner),
      limits_(limits),
      geometry_(runner.cache_geometry()),
      blocks_(geometry_.num_blocks) {
  limits_.validate(geometry_);
  for (int s = limits_.max_num_seqs - 1; s >= 0; --s) free_slots_.push_back(s);
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
  while (!waiting_.empty() && int(running_.size()) < limits_.max_num_seqs && !free_slots_.empty()) {
    Sequence& s = *waiting_.front();
    const int need = blocks_for(s);
    // First come, first served: later requests wait too. Headroom of one block per running
    // sequence keeps a new admission from being preempted by the next step's growth.
    const int headroom = running_.empty() ? 0 : int(running_.size());
    if (need + headroom > blocks_.num_free()) break;
    s.blocks = blocks_.allocate(need);
    s.slot = free_slots_.back();
    free_slots_.pop_back();
    // A preempted sequence keeps its sampler: penalties and draws continue where they were.
    if (!s.sampler) s.sampler.emplace(s.request.sampling, s.request.prompt, next_seed_++);
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
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

void Scheduler::preempt(std::unique_ptr<Sequence> s) {
  blocks_.release_all(s->blocks);
  if (s->slot >= 0) free_slots_.push_back(s->slot);
  s->slot = -1;
  s->computed = 0;  // recompute: prefill restarts at position 0, which resets the state slot
  ++counters_.preemptions;
  waiting_.push_front(std::move(s));  // it was admitted before everything still waiting
}

void Scheduler::finish(Sequence& s, FinishReason reason, const std::string& error) {
  s.finish = reason;
  if (s.slot >= 0) free_slots_.push_back(s.slot);
  s.slot = -1;
  blocks_.release_all(s.blocks);
  ++counters_.finished;
  RequestEvent e;
  e.finish = reason;
  e.error = error;
  e.prompt_tokens = s.prompt_len;
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
  running_.erase(std::remove_if(running_.begin(), running_.end(), done), running_.end());
}

void Scheduler::emit_token(Sequence& s, const float* logits) {
  const ModelConfig& c = runner_.config();
  const SampledToken t = s.sampler->sample(logits, c.vocab_size, c.eos_token_ids);
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
  e.completion_tokens = s.generated();
  e.time = Clock::now();
  if (reason == FinishReason::kNone) {
    if (s.request.on_event) s.request.on_event(e);
    return;
  }
  // The last token and the finish travel in one event.
  e.finish = reason;
  s.finish = reason;
  if (s.slot >= 0) free_slots_.push_back(s.slot);
  s.slot = -1;
  blocks_.release_all(s.blocks);
  ++counters_.finished;
  if (s.request.on_event) s.request.on_event(e);
}

bool Scheduler::step() {
  reap_cancelled();
  grow_or_preempt();  // before admission: running sequences have the first claim on free blocks
  admit();
  if (running_.empty()) return false;
  const auto t0 = Clock::now();

  // Decode rows first (they are latency bound), rotating when there are more than fit.
  ForwardBatch batch;
  std::vector<Sequence*> members;
  std::vector<bool> wants_token;
  std::vector<int> rows;
  const size_t n = running_.size();
  int decode_rows = 0;
  for (size_t i = 0; i < n && decode_rows < limits_.max_batch_size; ++i) {
    Sequence& s = *running_[(decode_cursor_ + i) % n];
    if (s.prefilling()) continue;
    batch.add_sequence({s.tokens.back()}, s.computed, s.slot, s.blocks);
    members.push_back(&s);
    wants_token.push_back(true);
    rows.push_back(1);
    ++decode_rows;
  }
  decode_cursor_ = n ? (decode_cursor_ + size_t(decode_rows)) % n : 0;
  int budget = limits_.max_prefill_tokens;
  for (auto& sp : running_) {
    Sequence& s = *sp;
    if (!s.prefilling() || budget <= 0) continue;
    const int start = s.computed;
    const int prefill_end = s.prefill_end();
    int end = std::min(prefill_end, start + budget);
    if (end < prefill_end) {
      // Split only on the KDA chunk grid so the arithmetic matches an unshared prefill.
      const int aligned = end / limits_.prefill_align * limits_.prefill_align;
      if (aligned <= start) continue;  // this step's leftover budget cannot reach the next boundary
      end = aligned;
    }
    // Only a first prefill samples; a recomputed one ends where the next decode step takes over.
    const bool sample = end == prefill_end && s.generated() == 0;
    batch.add_sequence({s.tokens.begin() + start, s.tokens.begin() + end}, start, s.slot, s.blocks,
                       sample);
    members.push_back(&s);
    wants_token.push_back(sample);
    rows.push_back(end - start);
    budget -= end - start;
    counters_.prompt_tokens += uint64_t(end - start);
  }
  if (members.empty()) return false;

  ForwardOutput out;
  try {
    runner_.forward(batch, out);
  } catch (const std::exception& e) {
    // A failed step fails its requests, never the server.
    for (Sequence* s : members) finish(*s, FinishReason::kError, e.what());
    reap_cancelled();
    auto done = [](const std::unique_ptr<Sequence>& s) { return s->finish != FinishReason::kNone; };
    running_.erase(std::remove_if(running_.begin(), running_.end(), done), running_.end());
    return true;
  }
  const int64_t vocab = runner_.config().vocab_size;
  size_t logit_row = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    Sequence& s = *members[i];
    s.computed += rows[i];
    if (!wants_token[i]) continue;
    try {
      emit_token(s, out.logits.data() + int64_t(logit_row) * vocab);
    } catch (const std::exception& e) {
      finish(s, FinishReason::kError, e.what());  // e.g. every logit masked or NaN
    }
    ++logit_row;
  }
  auto done = [](const std::unique_ptr<Sequence>& s) { return s->finish != FinishReason::kNone; };
  running_.erase(std::remove_if(running_.begin(), running_.end(), done), running_.end());
  ++counters_.steps;
  counters_.last_step_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  counters_.total_step_seconds += counters_.last_step_seconds;
  return true;
}

void Scheduler::cancel_all(FinishReason reason) {
  for (auto& s : waiting_) finish(*s, reason);
  for (auto& s : running_) finish(*s, reason);
  waiting_.clear();
  running_.clear();
}

}  // namespace sparkglm
