#include "engine/text/tool_parser.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"

namespace sparkglm {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kKeyOpen = "<arg_key>";
constexpr std::string_view kKeyClose = "</arg_key>";
constexpr std::string_view kValueOpen = "<arg_value>";
constexpr std::string_view kValueClose = "</arg_value>";
constexpr std::string_view kSpace = " \t\n\r";

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t k = std::min(text.size(), tag.size() - 1); k > 0; --k)
    if (text.substr(text.size() - k) == tag.substr(0, k)) return k;
  return 0;
}

std::string_view strip_left(std::string_view s) {
  const size_t first = s.find_first_not_of(kSpace);
  return first == std::string_view::npos ? std::string_view() : s.substr(first);
}

std::string_view strip(std::string_view s) {
  s = strip_left(s);
  return s.substr(0, s.find_last_not_of(kSpace) + 1);
}

// The JSON types a property's schema declares ("type": "x" or ["x", "y"]); empty when none.
std::vector<std::string> declared_types(const json& property) {
  std::vector<std::string> types;
  if (!property.is_object()) return types;
  const auto it = property.find("type");
  if (it == property.end()) return types;
  if (it->is_string()) types.push_back(it->get<std::string>());
  if (it->is_array())
    for (const json& t : *it)
      if (t.is_string()) types.push_back(t.get<std::string>());
  return types;
}

// The raw text as JSON, or nothing when it is not JSON (or is over the embedded-JSON bounds).
std::optional<ordered_json> as_json(std::string_view raw) {
  try {
    return parse_ordered_json(raw, "tool argument", ErrorKind::kInvalidArgument,
                              json_limits::kRequestEmbedded);
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

ToolCallParser::ToolCallParser(std::vector<json> tools, ToolParserLimits limits) : limits_(limits) {
  for (const json& tool : tools) {
    if (!tool.is_object()) continue;
    const json& function = tool.contains("function") ? tool["function"] : tool;
    if (!function.is_object()) continue;
    const auto name = function.find("name");
    const auto parameters = function.find("parameters");
    if (name == function.end() || !name->is_string() || parameters == function.end() ||
        !parameters->is_object())
      continue;
    const auto properties = parameters->find("properties");
    if (properties != parameters->end() && properties->is_object())
      properties_.emplace(name->get<std::string>(), *properties);
  }
}

void ToolCallParser::emit_content(std::string_view text, ToolParseDelta& out) {
  // Whitespace between a call and the first content shown separates them.
  if (calls_ > 0 && !shown_) text = strip_left(text);
  const size_t last = text.find_last_not_of(kSpace);
  if (last == std::string_view::npos) {
    whitespace_ += text;
    return;
  }
  out.content += whitespace_;
  out.content += text.substr(0, last + 1);
  whitespace_.assign(text.substr(last + 1));
  shown_ = true;
}

ToolParseDelta ToolCallParser::feed(std::string_view text) {
  ToolParseDelta out;
  held_ += text;
  while (true) {
    if (!in_call_) {
      const size_t open = held_.find(kCallOpen);
      if (open == std::string::npos) {
        const size_t keep = partial_tag_suffix(held_, kCallOpen);
        emit_content(std::string_view(held_).substr(0, held_.size() - keep), out);
        held_.erase(0, held_.size() - keep);
        return out;
      }
      if (calls_ >= limits_.max_calls) {  // past the bound, markup is text
        emit_content(std::string_view(held_).substr(0, open + kCallOpen.size()), out);
        held_.erase(0, open + kCallOpen.size());
        continue;
      }
      emit_content(std::string_view(held_).substr(0, open), out);
      // The whitespace before a call separates; it comes back if the call turns out malformed.
      call_whitespace_ = std::move(whitespace_);
      whitespace_.clear();
      held_.erase(0, open + kCallOpen.size());
      in_call_ = true;
      scanned_ = 0;
      continue;
    }
    const size_t close = held_.find(kCallClose, scanned_);
    if (close == std::string::npos) {
      if (held_.size() >= limits_.max_call_bytes + kCallClose.size()) {
        // No closing tag can start within the bound any more: the call is text.
        give_up_call(held_, out);
        held_.clear();
        return out;
      }
      scanned_ = held_.size() - std::min(held_.size(), kCallClose.size() - 1);
      return out;
    }
    ParsedToolCall call;
    const std::string_view body = std::string_view(held_).substr(0, close);
    if (close <= limits_.max_call_bytes && parse_call(body, call)) {
      out.calls.push_back(std::move(call));
      ++calls_;
      call_whitespace_.clear();
    } else {
      give_up_call(std::string(body) + std::string(kCallClose), out);
    }
    held_.erase(0, close + kCallClose.size());
    in_call_ = false;
  }
}

void ToolCallParser::give_up_call(const std::string& rest, ToolParseDelta& out) {
  in_call_ = false;
  std::string text = std::move(call_whitespace_);
  call_whitespace_.clear();
  text += kCallOpen;
  text += rest;
  emit_content(text, out);
}

ToolParseDelta ToolCallParser::flush() {
  ToolParseDelta out;
  if (in_call_) {
    give_up_call(held_, out);
  } else {
    emit_content(held_, out);
  }
  held_.clear();
  // Trailing whitespace is content only in a turn without calls.
  if (calls_ == 0) out.content += whitespace_;
  whitespace_.clear();
  return out;
}

ToolParseDelta ToolCallParser::parse(std::string_view text, std::vector<json> tools,
                                     ToolParserLimits limits) {
  ToolCallParser parser(std::move(tools), limits);
  ToolParseDelta out = parser.feed(text);
  ToolParseDelta rest = parser.flush();
  out.content += rest.content;
  for (auto& c : rest.calls) out.calls.push_back(std::move(c));
  return out;
}

bool ToolCallParser::parse_call(std::string_view body, ParsedToolCall& call) const {
  const size_t first_key = body.find(kKeyOpen);
  const std::string_view name = strip(body.substr(0, first_key));
  if (name.empty() || name.find_first_of("<>") != std::string_view::npos ||
      name.find_first_of(kSpace) != std::string_view::npos)
    return false;
  call.name.assign(name);
  std::string_view rest =
      first_key == std::string_view::npos ? std::string_view() : body.substr(first_key);
  while (!(rest = strip_left(rest)).empty()) {
    if (!rest.starts_with(kKeyOpen)) return false;
    rest.remove_prefix(kKeyOpen.size());
    const size_t key_end = rest.find(kKeyClose);
    if (key_end == std::string_view::npos) return false;
    const std::string key(strip(rest.substr(0, key_end)));
    if (key.empty()) return false;
    rest = strip_left(rest.substr(key_end + kKeyClose.size()));
    if (!rest.starts_with(kValueOpen)) return false;
    rest.remove_prefix(kValueOpen.size());
    const size_t value_end = rest.find(kValueClose);
    if (value_end == std::string_view::npos) return false;
    call.arguments[key] = typed_value(call.name, key, std::string(rest.substr(0, value_end)));
    rest.remove_prefix(value_end + kValueClose.size());
  }
  return true;
}

ordered_json ToolCallParser::typed_value(const std::string& tool, const std::string& key,
                                         const std::string& raw) const {
  const json* property = nullptr;
  if (const auto it = properties_.find(tool); it != properties_.end())
    if (const auto p = it->second.find(key); p != it->second.end()) property = &*p;
  const std::vector<std::string> types =
      property ? declared_types(*property) : std::vector<std::string>{};
  if (std::find(types.begin(), types.end(), "string") != types.end()) return raw;
  if (types.empty()) {
    // Undeclared: only an object or an array reads as JSON; anything else stays the text.
    const std::string_view s = strip(raw);
    if (!(s.starts_with('{') || s.starts_with('['))) return raw;
  }
  if (auto parsed = as_json(raw)) return std::move(*parsed);
  return raw;
}

}  // namespace sparkglm
