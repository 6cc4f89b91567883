#include "operator/env_assignments.h"

#include <set>

#include "engine/core/error.h"
#include "engine/core/shell_words.h"

namespace sparkglm::operator_tool {

using nlohmann::json;

namespace {

bool is_upper_key_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || is_upper_key_char(c) || c == '-' || c == '.' || c == '/' ||
         c == '$';
}

// A value that stands for one the reader fills in (`<half>`, `...`, `${X}`), not a value.
bool is_placeholder(const std::string& value) {
  return value.empty() || value.front() == '<' || value.find("...") != std::string::npos ||
         value.find('$') != std::string::npos || value == "…";
}

void add(EnvAssignments& out, std::set<std::string>& seen, const std::string& key,
         const std::string& value) {
  if (!seen.insert(key).second) {
    for (const EnvAssignment& a : out.assignments) {
      if (a.key == key && a.value != value)
        out.skipped.push_back(key + "=" + value + ": " + key + " is already assigned " + a.value);
    }
    return;
  }
  if (is_placeholder(value)) {
    out.skipped.push_back(key + "=" + value + ": a placeholder, not a value");
    return;
  }
  out.assignments.push_back({key, value});
}

std::string scalar_text(const json& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number() || v.is_boolean()) return v.dump();
  throw Error(ErrorKind::kInvalidConfig,
              where + ": expected a string, number or boolean value, got " + v.dump());
}

}  // namespace

bool is_env_key(const std::string& key) {
  if (key.empty() || (key[0] >= '0' && key[0] <= '9')) return false;
  for (char c : key) {
    if (!is_upper_key_char(c) && !(c >= 'a' && c <= 'z')) return false;
  }
  return true;
}

EnvAssignments extract_prose_assignments(const std::string& text) {
  EnvAssignments out;
  out.form = "prose";
  std::set<std::string> seen, named;
  std::vector<std::string> named_order;
  for (size_t i = 0; i < text.size();) {
    if (!is_upper_key_char(text[i]) || (i > 0 && is_word_char(text[i - 1]))) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && is_upper_key_char(text[end])) ++end;
    const std::string key = text.substr(i, end - i);
    const bool key_like = key.size() >= 2 && key[0] >= 'A' && key[0] <= 'Z';
    if (key_like && end < text.size() && text[end] == '=') {
      size_t stop = end + 1;
      while (stop < text.size() && text[stop] != ' ' && text[stop] != '\n' && text[stop] != '\t' &&
             text[stop] != ',' && text[stop] != ';' && text[stop] != ')' && text[stop] != '(')
        ++stop;
      std::string value = text.substr(end + 1, stop - end - 1);
      while (!value.empty() && (value.back() == '.' || value.back() == ':')) value.pop_back();
      add(out, seen, key, value);
      i = stop;
      continue;
    }
    // An identifier like NCCL_IB_HCA that the prose mentions without assigning it.
    const bool followed_by_word = end < text.size() && is_word_char(text[end]) && text[end] != '-';
    if (key_like && key.find('_') != std::string::npos && key.back() != '_' && !followed_by_word &&
        named.insert(key).second)
      named_order.push_back(key);
    i = end;
  }
  for (const std::string& key : named_order) {
    if (!seen.count(key)) out.skipped.push_back(key + ": named without a value");
  }
  return out;
}

EnvAssignments parse_env_assignments(const json& env, const std::string& where) {
  EnvAssignments out;
  std::set<std::string> seen;
  if (env.is_null()) {
    out.form = "none";
    return out;
  }
  if (env.is_object()) {
    out.form = "object";
    for (const auto& [key, value] : env.items()) {
      if (!is_env_key(key)) {
        out.skipped.push_back(key + ": not a variable name");
        continue;
      }
      add(out, seen, key, scalar_text(value, where + "." + key));
    }
    return out;
  }
  if (env.is_array()) {
    out.form = "list";
    for (const json& item : env) {
      const std::string text = scalar_text(item, where + "[]");
      const size_t eq = text.find('=');
      if (eq == std::string::npos || !is_env_key(text.substr(0, eq))) {
        out.skipped.push_back(text + ": not a KEY=VALUE assignment");
        continue;
      }
      add(out, seen, text.substr(0, eq), text.substr(eq + 1));
    }
    return out;
  }
  if (!env.is_string())
    throw Error(ErrorKind::kInvalidConfig,
                where + ": expected an object, a list or a string, got " + env.dump());
  const std::string text = env.get<std::string>();
  // "K=V K2='two words'": every word an assignment. Anything else is prose.
  try {
    const std::vector<std::string> words = split_shell_words(text, where);
    bool all_assignments = !words.empty();
    for (const std::string& w : words) {
      const size_t eq = w.find('=');
      if (eq == std::string::npos || !is_env_key(w.substr(0, eq))) all_assignments = false;
    }
    if (all_assignments) {
      out.form = "assignments";
      for (const std::string& w : words) {
        const size_t eq = w.find('=');
        add(out, seen, w.substr(0, eq), w.substr(eq + 1));
      }
      return out;
    }
  } catch (const Error&) {
    // Not a plain assignment list (prose often holds parentheses): read it as prose.
  }
  return extract_prose_assignments(text);
}

}  // namespace sparkglm::operator_tool
