#include "engine/core/cli_args.h"

#include "engine/core/error.h"
#include "engine/text/utf8_stream.h"

namespace sparkglm {

namespace {
[[noreturn]] void bad(const std::string& flag, const std::string& expected,
                      const std::string& got) {
  throw Error(ErrorKind::kInvalidArgument,
              flag + ": expected " + expected + ", got \"" + got + "\"");
}

int64_t parse_int(const std::string& flag, const std::string& text) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(text, &used, 0);
  } catch (const std::exception&) {
    bad(flag, "an integer", text);
  }
  if (used != text.size()) bad(flag, "an integer", text);
  return v;
}
}  // namespace

CliArgs::CliArgs(const std::vector<std::string>& args, const std::set<std::string>& switches) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) {
      positional_.push_back(a);
      continue;
    }
    std::string name = a, value;
    if (auto eq = a.find('='); eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
    } else if (switches.count(a)) {
      value = "true";
    } else {
      if (i + 1 >= args.size()) throw Error(ErrorKind::kInvalidArgument, a + ": expected a value");
      value = args[++i];
    }
    if (values_.count(name)) throw Error(ErrorKind::kInvalidArgument, name + ": given twice");
    values_[name] = value;
  }
}

bool CliArgs::has(const std::string& flag) const {
  mark_read(flag);
  return values_.count(flag) > 0;
}

std::string CliArgs::str(const std::string& flag, const std::string& fallback) const {
  mark_read(flag);
  auto it = values_.find(flag);
  return it == values_.end() ? fallback : it->second;
}

std::string CliArgs::required(const std::string& flag) const {
  mark_read(flag);
  auto it = values_.find(flag);
  if (it == values_.end()) throw Error(ErrorKind::kInvalidArgument, flag + " is required");
  return it->second;
}

int64_t CliArgs::integer(const std::string& flag, int64_t fallback, int64_t min,
                         int64_t max) const {
  mark_read(flag);
  auto it = values_.find(flag);
  if (it == values_.end()) return fallback;
  const int64_t v = parse_int(flag, it->second);
  if (v < min || v > max)
    bad(flag, "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]",
        it->second);
  return v;
}

std::vector<int32_t> CliArgs::int_list(const std::string& flag) const {
  const std::string text = required(flag);
  std::vector<int32_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const int64_t v = parse_int(flag, item);
    if (v < INT32_MIN || v > INT32_MAX) bad(flag, "32-bit integers", item);
    out.push_back(int32_t(v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void CliArgs::allow_only(const std::set<std::string>& known) const {
  for (const auto& [name, _] : values_)
    if (!known.count(name)) throw Error(ErrorKind::kInvalidArgument, "unknown flag " + name);
}

void CliArgs::reject_unread(const std::string& command) const {
  for (const auto& [name, _] : values_)
    if (!read_.count(name))
      throw Error(ErrorKind::kInvalidArgument,
                  name + ": given but not used by " + command +
                      " with these flags (a flag that does nothing is an error)");
}

void refuse_non_utf8_arguments(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string shown = valid_utf8(args[i]);
    if (shown != args[i])
      throw Error(ErrorKind::kInvalidArgument,
                  "argument " + std::to_string(i + 1) + " (\"" + shown +
                      "\") is not valid UTF-8; what this program records of its arguments is JSON "
                      "text, which cannot hold those bytes");
  }
}

}  // namespace sparkglm
