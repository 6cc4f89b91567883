#include "engine/core/shell_words.h"

#include "engine/core/error.h"

namespace sparkglm {

namespace {

[[noreturn]] void refuse(const std::string& where, size_t offset, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument,
              where + ": " + what + " at offset " + std::to_string(offset) +
                  " (a recipe's command must be one program and its arguments; it is split "
                  "like a shell would, never run by one)");
}

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}

}  // namespace

std::vector<std::string> split_shell_words(std::string_view text, const std::string& where) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  bool pending_newline = false;  // a newline seen after a word: fine only at the very end
  size_t newline_at = 0;
  auto finish = [&] {
    if (in_word) words.push_back(word);
    word.clear();
    in_word = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (pending_newline && !is_blank(c) && c != '\n')
      refuse(where, newline_at, "a newline separating two commands");
    if (c == '\\') {
      if (i + 1 >= text.size()) refuse(where, i, "a trailing backslash");
      if (text[i + 1] == '\n') {  // line continuation
        ++i;
        continue;
      }
      word += text[++i];
      in_word = true;
    } else if (c == '\'') {
      const size_t close = text.find('\'', i + 1);
      if (close == std::string_view::npos) refuse(where, i, "an unterminated single quote");
      word += text.substr(i + 1, close - i - 1);
      in_word = true;
      i = close;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '`' || (text[j] == '$' && j + 1 < text.size() && text[j + 1] == '('))
          refuse(where, j, "command substitution");
        if (text[j] == '\\' && j + 1 < text.size() &&
            (text[j + 1] == '"' || text[j + 1] == '\\' || text[j + 1] == '$' ||
             text[j + 1] == '`')) {
          word += text[++j];
        } else if (text[j] == '\\' && j + 1 < text.size() && text[j + 1] == '\n') {
          ++j;
        } else {
          word += text[j];
        }
      }
      if (j >= text.size()) refuse(where, i, "an unterminated double quote");
      in_word = true;
      i = j;
    } else if (is_blank(c)) {
      finish();
    } else if (c == '\n') {
      finish();
      if (!words.empty()) pending_newline = true, newline_at = i;
    } else if (c == '#' && !in_word) {
      // A comment runs to the end of its line.
      const size_t eol = text.find('\n', i);
      i = eol == std::string_view::npos ? text.size() : eol - 1;
    } else if (c == ';' || c == '&' || c == '|' || c == '<' || c == '>' || c == '(' || c == ')') {
      refuse(where, i, std::string("an unquoted shell operator '") + c + "'");
    } else if (c == '`' || (c == '$' && i + 1 < text.size() && text[i + 1] == '(')) {
      refuse(where, i, "command substitution");
    } else {
      word += c;
      in_word = true;
    }
  }
  finish();
  return words;
}

}  // namespace sparkglm
