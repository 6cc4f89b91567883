#pragma once
// One sequence's position in its CompiledGrammar: the live automaton stacks after the tokens
// accepted so far. fill_mask() gives the tokens allowed next, accept_token() advances by one,
// rollback() undoes the last accepted tokens (the MTP drafter advances a sequence's matcher through
// its drafts and rolls it back: runtime/speculation/drafter.h).
//
// With the grammar's after_reasoning, every token but eos is allowed until end_reasoning_id
// ("</think>") has been accepted; the grammar starts after it. eos is allowed exactly when the
// value is complete, so a constrained answer cannot end inside its reasoning, before its value (a
// forced tool call that never came was a 200 without one); once an eos is accepted the matcher is
// terminated and accepts nothing more.
//
// Cost per token: fill_mask copies one cached FrameMask per live stack (vocab / 32 words) and walks
// the trie only below its pop points; accept_token advances the stacks by the token's bytes.
// Memory: the stacks (at most max_stacks of at most max_stack_depth frames) and the rollback
// history of max_rollback such states.
#include <cstdint>
#include <deque>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/text/grammar/compiled_grammar.h"

namespace sparkglm {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // False (and no change) when the grammar refuses `id` here.
  bool accept_token(int32_t id);
  // Bytes as if they were tokens' bytes (tests, and text the engine forces).
  bool accept_bytes(std::string_view bytes);
  // Undoes the last `tokens` accepted tokens; at most max_rollback (asserts).
  void rollback(int tokens);
  int rollback_depth() const { return int(history_.size()); }

  // Writes the allowed-token bitset [mask_words()] (bit id % 32 of word id / 32).
  void fill_mask(uint32_t* bits) const;
  // The same into `bits`, sized to mask_words(); returns bits.data().
  const uint32_t* fill_mask(std::vector<uint32_t>& bits) const;
  // The value is complete: eos may come now.
  bool is_complete() const;
  bool is_terminated() const { return state_.terminated; }
  bool in_reasoning() const { return state_.reasoning; }
  int32_t mask_words() const { return grammar_->mask_words(); }
  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  struct State {
    std::vector<grammar::Stack> stacks;
    bool reasoning = false;
    bool terminated = false;
  };
  bool advance_bytes(std::string_view bytes, std::vector<grammar::Stack>& stacks) const;
  void remember();

  std::shared_ptr<const CompiledGrammar> grammar_;
  State state_;
  std::deque<State> history_;  // states before each accepted token, newest last
};

}  // namespace sparkglm
