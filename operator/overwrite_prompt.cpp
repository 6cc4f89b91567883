#include "operator/overwrite_prompt.h"

#include <unistd.h>

#include <cctype>

namespace sparkglm::operator_tool {

OverwriteAnswer ask_overwrite(const std::string& question, bool assume_yes, std::FILE* in,
                              std::FILE* out) {
  if (assume_yes) return OverwriteAnswer::kYes;
  if (!isatty(fileno(in))) return OverwriteAnswer::kNoTerminal;
  std::fprintf(out, "%s [y/N] ", question.c_str());
  std::fflush(out);
  std::string line;
  for (int c = std::fgetc(in); c != EOF && c != '\n'; c = std::fgetc(in)) line += char(c);
  std::string word;
  for (char c : line)
    if (!std::isspace(static_cast<unsigned char>(c)))
      word += char(std::tolower(static_cast<unsigned char>(c)));
  return word == "y" || word == "yes" ? OverwriteAnswer::kYes : OverwriteAnswer::kNo;
}

}  // namespace sparkglm::operator_tool
