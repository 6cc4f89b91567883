#pragma once
// Deterministic filler for prompts: words of prose, lines of code, rows of a lookup table. Unit i
// of a stream depends only on (seed, i), so filler(n) is a prefix of filler(n + 1) and a prompt's
// bytes depend on nothing but its seed. Draws come from SplitMix64, never from <random>'s
// distributions, whose outputs differ between standard libraries. No unit contains "[[", the
// start of an isolation marker.
#include <cstdint>
#include <string>

namespace sparkglm::workloads {

// Mixes a seed with a stream tag and an index into one 64-bit seed (SplitMix64 finaliser).
uint64_t mix_seed(uint64_t seed, uint64_t tag, uint64_t index = 0);

// Uniform integer in [lo, hi] from the draw number `index` of stream `seed`.
int64_t draw_between(uint64_t seed, uint64_t index, int64_t lo, int64_t hi);

// n words of English-like prose (" word", sentence ends with ".", the next word capitalised).
std::string prose_words(uint64_t seed, int64_t n);
// n lines of a small C++ function body ("  int v12 = v3 * 41 + 7;\n").
std::string code_lines(uint64_t seed, int64_t n);
// A lowercase tag of `letters` letters from the draw, e.g. "kqzmrd" (for table keys and codes).
std::string letter_tag(uint64_t seed, uint64_t index, int letters);

}  // namespace sparkglm::workloads
