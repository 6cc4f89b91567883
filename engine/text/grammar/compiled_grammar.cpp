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

namespace {

// The bytes that determine a string or number frame's walk: its node's parameters and the frame's
// own fields (not the node id, which differs between grammars).
std::string leaf_key(const grammar::Node& n, const grammar::Frame& f) {
  std::string k;
  auto put = [&k](const auto& v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(uint8_t(n.kind));
  if (n.kind == grammar::NodeKind::kString) {
    put(uint8_t(n.raw));
    put(n.min_length);
    put(n.max_length);
  } else {
    put(uint8_t(n.integer | n.has_min << 1 | n.has_max << 2 | n.exclusive_min << 3 |
                n.exclusive_max << 4));
    put(n.imin);
    put(n.imax);
    put(n.min);
    put(n.max);
  }
  put(f.state);
  put(f.a);
  put(f.b);
  put(f.c);
  put(f.d);
  return k;
}

}  // namespace

std::shared_ptr<const CompiledGrammar::FrameMask> CompiledGrammar::frame_mask(
    const grammar::Frame& top) const {
  const grammar::Node& node = grammar_.nodes[size_t(top.node)];
  const bool leaf =
      node.kind == grammar::NodeKind::kString || node.kind == grammar::NodeKind::kNumber;
  if (leaf) {
    SharedFrameMasks& shared = vocabulary_.shared_masks();
    const std::string key = leaf_key(node, top);
    {
      std::lock_guard<std::mutex> lock(shared.mutex);
      if (auto it = shared.entries.find(key); it != shared.entries.end()) {
        std::lock_guard<std::mutex> own(mutex_);
        ++stats_.hits;
        return std::static_pointer_cast<const FrameMask>(it->second);
      }
    }
    auto m = std::make_shared<const FrameMask>(
        grammar::build_frame_mask(automaton_, vocabulary_.trie(), top, vocab_size()));
    const size_t entry = m->memory_bytes() + key.size() + 64;
    {
      std::lock_guard<std::mutex> own(mutex_);
      ++stats_.misses;
    }
    std::lock_guard<std::mutex> lock(shared.mutex);
    if (shared.bytes + entry > SharedFrameMasks::kBytes) {
      shared.entries.clear();  // bounded: start over (entries in use stay alive by refcount)
      shared.bytes = 0;
    }
    if (shared.entries.emplace(key, m).second) shared.bytes += entry;
    return m;
  }
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
  const grammar::TagBytes tags = [&vocabulary](std::string_view text) {
    return vocabulary.tag_bytes(text);
  };
  return std::make_shared<const CompiledGrammar>(grammar::compile_grammar(constraint, limits, tags),
                                                 vocabulary, constraint.after_reasoning);
}

}  // namespace sparkglm
