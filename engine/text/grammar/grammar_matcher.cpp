#include "engine/text/grammar/grammar_matcher.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/text/grammar/token_mask_walk.h"

namespace sparkglm {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)) {
  SPARKGLM_ASSERT(grammar_ != nullptr, "GrammarMatcher needs a grammar");
  state_.stacks.push_back(grammar_->automaton().initial());
  state_.reasoning = grammar_->after_reasoning();
}

void GrammarMatcher::remember() {
  history_.push_back(state_);
  if (int(history_.size()) > grammar_->grammar().limits.max_rollback) history_.pop_front();
}

bool GrammarMatcher::advance_bytes(std::string_view bytes,
                                   std::vector<grammar::Stack>& stacks) const {
  const grammar::ByteAutomaton& a = grammar_->automaton();
  std::vector<grammar::Stack> next;
  for (char c : bytes) {
    next.clear();
    for (const grammar::Stack& s : stacks) a.advance(s, uint8_t(c), next);
    for (grammar::Stack& s : next) a.normalize(s);
    grammar::dedupe_stacks(next, grammar_->grammar().limits.max_stacks);
    if (next.empty()) return false;
    stacks.swap(next);
  }
  return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
  if (state_.terminated || id < 0 || id >= grammar_->vocab_size()) return false;
  const TokenVocabulary& v = grammar_->vocabulary();
  if (state_.reasoning) {
    remember();
    if (id == v.end_reasoning_id()) state_.reasoning = false;
    return true;
  }
  if (v.is_eos(id)) {
    if (!is_complete()) return false;
    remember();
    state_.terminated = true;
    return true;
  }
  const std::string& bytes = v.bytes(id);
  if (bytes.empty()) return false;
  std::vector<grammar::Stack> stacks = state_.stacks;
  if (!advance_bytes(bytes, stacks)) return false;
  remember();
  state_.stacks = std::move(stacks);
  return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (state_.terminated || state_.reasoning) return false;
  std::vector<grammar::Stack> stacks = state_.stacks;
  if (!advance_bytes(bytes, stacks)) return false;
  remember();
  state_.stacks = std::move(stacks);
  return true;
}

void GrammarMatcher::rollback(int tokens) {
  SPARKGLM_ASSERT(tokens >= 0 && tokens <= int(history_.size()),
                  "GrammarMatcher::rollback beyond its history");
  if (tokens == 0) return;
  history_.erase(history_.end() - tokens + 1, history_.end());
  state_ = std::move(history_.back());
  history_.pop_back();
}

bool GrammarMatcher::is_complete() const {
  if (state_.reasoning || state_.terminated) return false;
  for (const grammar::Stack& s : state_.stacks)
    if (grammar_->automaton().can_finish(s)) return true;
  return false;
}

const uint32_t* GrammarMatcher::fill_mask(std::vector<uint32_t>& bits) const {
  bits.resize(size_t(mask_words()));
  fill_mask(bits.data());
  return bits.data();
}

void GrammarMatcher::fill_mask(uint32_t* bits) const {
  const int32_t words = grammar_->mask_words();
  const TokenVocabulary& v = grammar_->vocabulary();
  if (state_.reasoning) {
    std::fill(bits, bits + words, ~0u);
    for (int32_t e : v.eos_ids()) bits[e >> 5] &= ~(1u << (e & 31));
    return;
  }
  std::fill(bits, bits + words, 0u);
  if (!state_.terminated) {
    const grammar::ByteAutomaton& a = grammar_->automaton();
    for (const grammar::Stack& s : state_.stacks) {
      const auto m = grammar_->frame_mask(s.back());
      // The mask was walked from the top frame alone. Where its walk, stacked on this stack, could
      // push a frame past max_stack_depth, the automaton refuses what the mask allows: this
      // stack's tokens are walked from the whole stack instead.
      if (int(s.size()) + m->peak - 2 >= grammar_->grammar().limits.max_stack_depth) {
        grammar::mark_subtree(a, v.trie(), {s}, -1, bits);
        continue;
      }
      if (!m->bits.empty())
        for (int32_t w = 0; w < words; ++w) bits[w] |= m->bits[size_t(w)];
      for (int32_t id : m->ids) bits[id >> 5] |= 1u << (id & 31);
      if (m->pops.empty() && !m->pop_at_root) continue;
      // Where the top frame can end, the rest of the token goes to the frame below.
      std::vector<grammar::Stack> below(1, grammar::Stack(s.begin(), s.end() - 1));
      a.child_done(below[0].back());
      if (m->pop_at_root) grammar::mark_subtree(a, v.trie(), below, -1, bits);
      for (int32_t node : m->pops) grammar::mark_subtree(a, v.trie(), below, node, bits);
    }
  }
  if (is_complete() || state_.terminated)
    for (int32_t e : v.eos_ids()) bits[e >> 5] |= 1u << (e & 31);
}

}  // namespace sparkglm
