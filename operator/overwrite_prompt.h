#pragma once
// The question asked before a file is replaced: y/N on a terminal (no is the default), --yes
// answers yes, and without a terminal and without --yes the answer is a refusal, not a guess.
#include <cstdio>
#include <string>

namespace sparkglm::operator_tool {

enum class OverwriteAnswer { kYes, kNo, kNoTerminal };

// Asks `question` + " [y/N] " on `out` and reads one line from `in` when `in` is a terminal
// (isatty). "y" or "yes" in any case is yes; anything else, an empty line or end of input, no.
OverwriteAnswer ask_overwrite(const std::string& question, bool assume_yes, std::FILE* in,
                              std::FILE* out);

}  // namespace sparkglm::operator_tool
