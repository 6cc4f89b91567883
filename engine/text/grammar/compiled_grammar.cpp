#include "engine/text/grammar/compiled_grammar.h"

#include "engine/text/grammar/schema_compiler.h"
#include "engine/text/grammar/token_mask_walk.h"

namespace sparkglm {

size_t CompiledGrammar::FrameMask::memory_bytes() const {
  return sizeof(FrameMask) + (ids.capacity() + pops.capacity()) * sizeof(int32_t) +
         bits.capacity() * sizeof(uint32_t);
}

CompiledGrammar::CompiledGrammar(grammar::Grammar g, TokenVocabulary vocabulary,
                                 bool after_reasoning)
    : grammar_(std::move(g)),
      automaton_(grammar_),
      vocabulary_(std::move(vocabulary)),
      after_reasoning_(after_reasoning) {}

std::shared_ptr<const CompiledGrammar::FrameMask> CompiledGrammar::frame_mask(
    const grammar::Frame& top) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = cache_.find(top); it != cache_.end()) {
      ++stats_.hits;
      return it->second;
    }
  }
  // Built outside the lock: two threads may build the same entry; both are equal.
  auto m = std::make_shared<const FrameMask>(
      grammar::build_frame_mask(automaton_, vocabulary_.trie(), top, vocab_size()));
  const size_t entry = m->memory_bytes() + sizeof(grammar::Frame) + 64;
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.misses;
  if (stats_.bytes + entry > size_t(grammar_.limits.mask_cache_bytes)) {
    cache_.clear();  // bounded memory: start over (the entries in use stay alive by refcount)
    stats_.bytes = 0;
    ++stats_.clears;
  }
  if (cache_.emplace(top, m).second) stats_.bytes += entry;
  return m;
}

size_t CompiledGrammar::memory_bytes() const {
  size_t n = sizeof(*this);
  for (const auto& node : grammar_.nodes)
    n += sizeof(node) + node.literal.capacity() + node.children.capacity() * sizeof(int32_t) +
         node.properties.capacity() * sizeof(grammar::Property);
  std::lock_guard<std::mutex> lock(mutex_);
  return n + stats_.bytes;
}

CompiledGrammar::CacheStats CompiledGrammar::cache_stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  CacheStats s = stats_;
  s.entries = cache_.size();
  return s;
}

std::shared_ptr<const CompiledGrammar> compile_output_constraint(
    const OutputConstraint& constraint, const TokenVocabulary& vocabulary,
    const grammar::GrammarLimits& limits) {
  if (!constraint.active()) return nullptr;
  return std::make_shared<const CompiledGrammar>(grammar::compile_grammar(constraint, limits),
                                                 vocabulary, constraint.after_reasoning);
}

}  // namespace sparkglm
