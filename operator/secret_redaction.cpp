#include "operator/secret_redaction.h"

#include <cctype>

namespace sparkglm::operator_tool {

namespace {

// Lower-case words of a name split at '-', '_' and '.': "OPENAI_API_KEY" -> openai, api, key.
std::vector<std::string> words_of(const std::string& name) {
  std::vector<std::string> words(1);
  for (char ch : name) {
    if (ch == '-' || ch == '_' || ch == '.') {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    words.back() += char(std::tolower(static_cast<unsigned char>(ch)));
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// The name of a "--flag=value", "--flag" or "KEY=value" word ("" when the word is none of them).
std::string flag_name(const std::string& word, size_t* eq) {
  *eq = word.find('=');
  size_t start = 0;
  while (start < word.size() && start < 2 && word[start] == '-') ++start;
  if (start == 0 && *eq == std::string::npos) return "";  // a plain word, not a flag
  return word.substr(start, *eq == std::string::npos ? std::string::npos : *eq - start);
}

}  // namespace

bool is_secret_name(const std::string& name) {
  const std::vector<std::string> words = words_of(name);
  // "api-key-file", "HF_TOKEN_PATH", "--api-key-env": they say where a secret is, not what.
  if (!words.empty() && (words.back() == "file" || words.back() == "path" ||
                         words.back() == "env" || words.back() == "dir"))
    return false;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    // "token" but not "tokens" or "tokenizer": the limits recipes set are counted in tokens.
    if (ends_with(w, "token") || ends_with(w, "secret") || ends_with(w, "password") ||
        ends_with(w, "apikey") || w == "passwd" || w == "credential" || w == "credentials" ||
        w == "auth" || w == "authorization" || w == "bearer" || w == "cookie")
      return true;
    if (w == "key" || w == "keys") {
      if (words.size() == 1) return true;
      const std::string& before = i > 0 ? words[i - 1] : "";
      if (before == "api" || before == "access" || before == "private" || before == "secret" ||
          before == "auth" || before == "signing")
        return true;
    }
  }
  return false;
}

std::vector<std::string> redact_argv(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  out.reserve(argv.size());
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& word = argv[i];
    size_t eq = 0;
    const std::string name = flag_name(word, &eq);
    if (name.empty() || !is_secret_name(name)) {
      out.push_back(word);
      continue;
    }
    if (eq != std::string::npos) {
      out.push_back(word.substr(0, eq + 1) + kRedacted);
      continue;
    }
    out.push_back(word);
    // "--api-key K": the next word is the value unless it is another flag.
    if (word.rfind("-", 0) == 0 && i + 1 < argv.size() && argv[i + 1].rfind("-", 0) != 0) {
      out.push_back(kRedacted);
      ++i;
    }
  }
  return out;
}

std::string redact_text(const std::string& text) {
  // Split into alternating runs of space and non-space, redact the words, join them back.
  std::vector<std::string> runs;
  std::vector<bool> is_word;
  for (char ch : text) {
    const bool word = !std::isspace(static_cast<unsigned char>(ch));
    if (runs.empty() || is_word.back() != word) {
      runs.emplace_back();
      is_word.push_back(word);
    }
    runs.back() += ch;
  }
  std::vector<std::string> words;
  for (size_t i = 0; i < runs.size(); ++i)
    if (is_word[i]) words.push_back(runs[i]);
  const std::vector<std::string> redacted = redact_argv(words);
  std::string out;
  for (size_t i = 0, w = 0; i < runs.size(); ++i) out += is_word[i] ? redacted[w++] : runs[i];
  return out;
}

}  // namespace sparkglm::operator_tool
