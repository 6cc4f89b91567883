#pragma once
// Walks of the vocabulary trie under the byte automaton: a subtree of the trie is visited in
// preorder with the set of stacks each prefix leads to; a prefix no stack accepts skips its whole
// subtree. Work per walk: the trie nodes whose prefix is accepted, each advancing a few stacks.
#include <cstdint>
#include <vector>

#include "engine/text/grammar/byte_automaton.h"
#include "engine/text/grammar/compiled_grammar.h"
#include "engine/text/grammar/token_vocabulary.h"

namespace sparkglm::grammar {

// The context-independent mask of `top` (compiled_grammar.h's FrameMask).
CompiledGrammar::FrameMask build_frame_mask(const ByteAutomaton& automaton,
                                            const TokenVocabulary::Trie& trie, const Frame& top,
                                            int32_t vocab_size);

// Sets in `bits` every token of the subtree below trie node `node` (-1: the whole trie) whose
// bytes after that node some stack of `from` accepts.
void mark_subtree(const ByteAutomaton& automaton, const TokenVocabulary::Trie& trie,
                  const std::vector<Stack>& from, int32_t node, uint32_t* bits);

// Sorts, removes duplicates and keeps at most `cap` stacks.
void dedupe_stacks(std::vector<Stack>& stacks, int cap);

}  // namespace sparkglm::grammar
