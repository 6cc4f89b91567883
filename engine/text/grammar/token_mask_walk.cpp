#include "engine/text/grammar/token_mask_walk.h"

#include <algorithm>

namespace sparkglm::grammar {

namespace {

// Visits the trie nodes in [begin, end) (a subtree below a node of depth base_depth) whose prefix
// some stack accepts, calling on_node(node, stacks) for each.
template <typename OnNode>
void walk(const ByteAutomaton& automaton, const TokenVocabulary::Trie& trie,
          const std::vector<Stack>& from, int32_t begin, int32_t end, int32_t base_depth,
          OnNode on_node) {
  const int cap = automaton.grammar().limits.max_stacks;
  std::vector<std::vector<Stack>> levels(1, from);
  int32_t i = begin;
  while (i < end) {
    const size_t d = size_t(trie.depth[size_t(i)] - base_depth);
    if (levels.size() <= d) levels.resize(d + 1);
    const std::vector<Stack>& parent = levels[d - 1];
    std::vector<Stack>& cur = levels[d];
    cur.clear();
    for (const Stack& s : parent) automaton.advance(s, trie.byte[size_t(i)], cur);
    dedupe_stacks(cur, cap);
    if (cur.empty()) {
      i = trie.end[size_t(i)];  // no token below this prefix can be accepted
      continue;
    }
    on_node(i, cur);
    ++i;
  }
}

void set_bit(uint32_t* bits, int32_t id) {
  bits[id >> 5] |= 1u << (id & 31);
}

}  // namespace

void dedupe_stacks(std::vector<Stack>& stacks, int cap) {
  if (stacks.size() > 1) {
    std::sort(stacks.begin(), stacks.end());
    stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  }
  // Alternatives beyond the cap are dropped: what is generated stays valid, though a value only
  // a dropped alternative could produce is no longer reachable.
  if (int(stacks.size()) > cap) stacks.resize(size_t(cap));
}

CompiledGrammar::FrameMask build_frame_mask(const ByteAutomaton& automaton,
                                            const TokenVocabulary::Trie& trie, const Frame& top,
                                            int32_t vocab_size) {
  CompiledGrammar::FrameMask m;
  const std::vector<Stack> from{Stack{top}};
  m.pop_at_root = automaton.bottom_can_pop(from[0]);
  std::vector<uint32_t> bits(size_t((vocab_size + 31) / 32), 0);
  int64_t count = 0;
  walk(automaton, trie, from, 0, int32_t(trie.byte.size()), 0,
       [&](int32_t node, const std::vector<Stack>& stacks) {
         for (int32_t k = trie.token_begin[size_t(node)]; k < trie.token_begin[size_t(node) + 1];
              ++k, ++count)
           set_bit(bits.data(), trie.ids[size_t(k)]);
         for (const Stack& s : stacks) m.peak = std::max(m.peak, int32_t(s.size()));
         for (const Stack& s : stacks)
           if (automaton.bottom_can_pop(s)) {
             m.pops.push_back(node);
             break;
           }
       });
  // A list when it is smaller than the bitset.
  if (count * 32 < int64_t(vocab_size)) {
    for (int32_t w = 0; w < int32_t(bits.size()); ++w)
      for (uint32_t x = bits[size_t(w)]; x; x &= x - 1) m.ids.push_back(w * 32 + __builtin_ctz(x));
  } else {
    m.bits = std::move(bits);
  }
  m.pops.shrink_to_fit();
  return m;
}

void mark_subtree(const ByteAutomaton& automaton, const TokenVocabulary::Trie& trie,
                  const std::vector<Stack>& from, int32_t node, uint32_t* bits) {
  const int32_t begin = node + 1;
  const int32_t end = node < 0 ? int32_t(trie.byte.size()) : trie.end[size_t(node)];
  const int32_t base_depth = node < 0 ? 0 : trie.depth[size_t(node)];
  walk(automaton, trie, from, begin, end, base_depth, [&](int32_t n, const std::vector<Stack>&) {
    for (int32_t k = trie.token_begin[size_t(n)]; k < trie.token_begin[size_t(n) + 1]; ++k)
      set_bit(bits, trie.ids[size_t(k)]);
  });
}

}  // namespace sparkglm::grammar
