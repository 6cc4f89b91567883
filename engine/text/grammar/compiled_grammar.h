#pragma once
// A request's output constraint compiled against the model's vocabulary: the grammar, its byte
// automaton, the vocabulary's trie, and a bounded cache of per-frame token masks.
//
// The mask cache is xgrammar's context-independent tokens, keyed by frame: for the top frame F
// of a stack, a walk of the vocabulary trie from F alone (FrameMask) splits the tokens into
//   - accepted: F (and children it pushes) consume every byte: accepted in any context;
//   - pop points: trie nodes where F can end, so the rest of the token goes to F's parent: those
//     subtrees are walked again with the real stack below F at mask time (usually few tokens:
//     those that close a string or a number and go on with ',' or '}');
//   - everything else is refused whatever lies below F.
// Equal frames repeat often (a string's body, an object waiting for its next key), so the walk of
// the whole vocabulary is done once per distinct frame. Frames of strings and numbers (the walks
// that visit most of the vocabulary) are cached with the vocabulary (SharedFrameMasks), so later
// requests find them warm; other frames in this grammar's cache, which holds at most
// GrammarLimits::mask_cache_bytes and is emptied and refilled when full.
//
// compile_output_constraint is what the server calls at admission: it validates the schema
// (Error(kInvalidArgument) naming the keyword and its JSON path, which the server turns into 400)
// and returns the grammar every sequence of the request matches against (thread-safe: the cache
// takes a lock).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine/text/grammar/byte_automaton.h"
#include "engine/text/grammar/grammar.h"
#include "engine/text/grammar/token_vocabulary.h"
#include "engine/text/output_constraint.h"

namespace sparkglm {

class CompiledGrammar {
 public:
  struct FrameMask {
    std::vector<int32_t> ids;    // accepted ids, ascending, when few
    std::vector<uint32_t> bits;  // else accepted ids as a bitset [mask words]
    std::vector<int32_t> pops;   // trie nodes after which the frame can end
    bool pop_at_root = false;    // the frame can end before the token's first byte
    // The deepest stack the walk reached from the top frame alone (1 = it pushed nothing): under a
    // stack this deep minus one, a push the walk made may hit max_stack_depth
    // (grammar_matcher.cpp).
    int32_t peak = 1;
    size_t memory_bytes() const;
  };
  struct CacheStats {
    uint64_t hits = 0, misses = 0, clears = 0;
    size_t bytes = 0, entries = 0;
  };

  CompiledGrammar(grammar::Grammar g, TokenVocabulary vocabulary, bool after_reasoning);
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  const grammar::Grammar& grammar() const { return grammar_; }
  const grammar::ByteAutomaton& automaton() const { return automaton_; }
  const TokenVocabulary& vocabulary() const { return vocabulary_; }
  bool after_reasoning() const { return after_reasoning_; }
  int32_t vocab_size() const { return vocabulary_.vocab_size(); }
  int32_t mask_words() const { return (vocabulary_.vocab_size() + 31) / 32; }

  // The cached mask of `top` (computed on a miss).
  std::shared_ptr<const FrameMask> frame_mask(const grammar::Frame& top) const;
  // Bytes this grammar holds: nodes and the mask cache (the vocabulary's trie is shared).
  size_t memory_bytes() const;
  CacheStats cache_stats() const;

 private:
  grammar::Grammar grammar_;
  grammar::ByteAutomaton automaton_;
  TokenVocabulary vocabulary_;
  bool after_reasoning_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<grammar::Frame, std::shared_ptr<const FrameMask>, grammar::FrameHash>
      cache_;
  mutable CacheStats stats_;
};

// nullptr for an inactive constraint; Error(kInvalidArgument) for a schema outside the subset
// (schema_compiler.h) or beyond the limits.
std::shared_ptr<const CompiledGrammar> compile_output_constraint(
    const OutputConstraint& constraint, const TokenVocabulary& vocabulary,
    const grammar::GrammarLimits& limits = {});

}  // namespace sparkglm
