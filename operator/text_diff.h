#pragma once
// A line diff in the unified format people know from `diff -u`, for showing what overwriting a
// profile would change.
#include <string>

namespace sparkglm::operator_tool {

// "" when the texts are equal. Otherwise "--- old_label\n+++ new_label\n@@ -a,b +c,d @@\n" hunks
// with `context` unchanged lines around each change.
std::string unified_diff(const std::string& old_text, const std::string& new_text,
                         const std::string& old_label, const std::string& new_label,
                         int context = 3);

}  // namespace sparkglm::operator_tool
