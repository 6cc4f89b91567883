#pragma once
// Splits a command line into words the way a POSIX shell would (quotes, backslashes, line
// continuations), without running a shell and without expanding anything. A recipe's serve
// command is data: text that only a shell could give meaning to (`;`, `|`, `&`, redirections,
// command substitution, globs are left alone but operators are refused) is an error, never run.
#include <string>
#include <string_view>
#include <vector>

namespace sparkglm {

// Throws Error(kInvalidArgument, "<where>: ...") naming the offending character and its offset
// for an unquoted operator (; & | < > ( ) or a newline between words), command substitution
// ($( or `), or an unterminated quote. `$NAME` is kept literally: nothing is expanded.
std::vector<std::string> split_shell_words(std::string_view text, const std::string& where);

}  // namespace sparkglm
