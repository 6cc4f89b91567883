#include "engine/options/option_registry.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>

#include "engine/core/error.h"

namespace sparkglm {

const char* to_string(OptionType type) {
  switch (type) {
    case OptionType::kBool:
      return "bool";
    case OptionType::kInt:
      return "int";
    case OptionType::kBytes:
      return "bytes";
    case OptionType::kFloat:
      return "float";
    case OptionType::kString:
      return "string";
    case OptionType::kEnum:
      return "enum";
  }
  return "?";
}

const char* to_string(OptionStatus status) {
  switch (status) {
    case OptionStatus::kDefault:
      return "default";
    case OptionStatus::kCandidate:
      return "candidate";
    case OptionStatus::kHeldBack:
      return "held_back";
    case OptionStatus::kRejected:
      return "rejected";
  }
  return "?";
}

const char* to_string(ProfileSection section) {
  switch (section) {
    case ProfileSection::kTopLevel:
      return "the top level";
    case ProfileSection::kLimits:
      return "limits";
    case ProfileSection::kOptions:
      return "options";
    case ProfileSection::kServerArgs:
      return "server_args";
    case ProfileSection::kCommandLineOnly:
      return "the command line only";
  }
  return "?";
}

namespace {

std::optional<int64_t> parse_decimal(std::string_view text) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v, 10);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

// "64MiB" -> 67108864. Digits, then an optional unit; no sign, no fraction.
std::optional<int64_t> parse_byte_count(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::optional<int64_t> mantissa = parse_decimal(text.substr(0, digits));
  if (!mantissa) return std::nullopt;
  std::string unit(text.substr(digits));
  for (char& c : unit) c = char(std::tolower(static_cast<unsigned char>(c)));
  static const std::pair<const char*, int64_t> kUnits[] = {
      {"", 1},
      {"b", 1},
      {"k", int64_t(1) << 10},
      {"kib", int64_t(1) << 10},
      {"m", int64_t(1) << 20},
      {"mib", int64_t(1) << 20},
      {"g", int64_t(1) << 30},
      {"gib", int64_t(1) << 30},
      {"t", int64_t(1) << 40},
      {"tib", int64_t(1) << 40},
      {"kb", 1000},
      {"mb", 1000 * 1000},
      {"gb", int64_t(1000) * 1000 * 1000},
      {"tb", int64_t(1000) * 1000 * 1000 * 1000}};
  for (const auto& [name, scale] : kUnits) {
    if (unit != name) continue;
    if (*mantissa > INT64_MAX / scale) return std::nullopt;
    return *mantissa * scale;
  }
  return std::nullopt;
}

std::optional<double> parse_real(std::string_view text) {
  double v = 0.0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string number_text(double v) {
  return nlohmann::json(v).dump();
}

}  // namespace

bool ReceiptRef::is_id(const std::string& id) {
  if (id.empty() || !(std::islower(static_cast<unsigned char>(id[0])) ||
                      std::isdigit(static_cast<unsigned char>(id[0]))))
    return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
}

bool ReceiptRef::is_sha256(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

namespace {

bool is_option_name(const std::string& name) {
  if (name.empty() || name.front() < 'a' || name.front() > 'z' || name.back() == '-') return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok || (c == '-' && name[i - 1] == '-')) return false;
  }
  return true;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string placeholder(const OptionSpec& s) {
  switch (s.type) {
    case OptionType::kBool:
      return "[=true|false]";
    case OptionType::kInt:
      return " N";
    case OptionType::kBytes:
      return " BYTES";
    case OptionType::kFloat:
      return " X";
    case OptionType::kString:
      return " TEXT";
    case OptionType::kEnum: {
      std::string out = " ";
      for (size_t i = 0; i < s.allowed.size(); ++i) out += (i ? "|" : "") + s.allowed[i];
      return out;
    }
  }
  return "";
}

}  // namespace

std::string OptionSpec::expected() const {
  switch (type) {
    case OptionType::kBool:
      return "true or false";
    case OptionType::kInt:
      return "an integer in [" + std::to_string(min_int) + ", " + std::to_string(max_int) + "]";
    case OptionType::kBytes:
      return "a byte count in [" + std::to_string(min_int) + ", " + std::to_string(max_int) +
             "] (digits with an optional unit: 64MiB, 2G, 1000KB)";
    case OptionType::kFloat:
      return "a number in [" + number_text(min_float) + ", " + number_text(max_float) + "]";
    case OptionType::kString:
      return "a non-empty string";
    case OptionType::kEnum: {
      std::string out = "one of ";
      for (size_t i = 0; i < allowed.size(); ++i) out += (i ? ", " : "") + allowed[i];
      return out;
    }
  }
  return "?";
}

bool OptionSpec::accepts(const OptionValue& v) const {
  switch (type) {
    case OptionType::kBool:
      return std::holds_alternative<bool>(v);
    case OptionType::kInt:
    case OptionType::kBytes: {
      const int64_t* i = std::get_if<int64_t>(&v);
      return i && *i >= min_int && *i <= max_int;
    }
    case OptionType::kFloat: {
      const double* d = std::get_if<double>(&v);
      return d && std::isfinite(*d) && *d >= min_float && *d <= max_float;
    }
    case OptionType::kString: {
      const std::string* s = std::get_if<std::string>(&v);
      return s && !s->empty();
    }
    case OptionType::kEnum: {
      const std::string* s = std::get_if<std::string>(&v);
      return s && std::find(allowed.begin(), allowed.end(), *s) != allowed.end();
    }
  }
  return false;
}

std::optional<OptionValue> OptionSpec::try_parse(std::string_view text) const {
  std::optional<OptionValue> v;
  switch (type) {
    case OptionType::kBool:
      if (text == "true") v = true;
      if (text == "false") v = false;
      break;
    case OptionType::kInt:
      if (auto i = parse_decimal(text)) v = *i;
      break;
    case OptionType::kBytes:
      if (auto i = parse_byte_count(text)) v = *i;
      break;
    case OptionType::kFloat:
      if (auto d = parse_real(text)) v = *d;
      break;
    case OptionType::kString:
    case OptionType::kEnum:
      v = std::string(text);
      break;
  }
  if (v && !accepts(*v)) v.reset();
  return v;
}

OptionValue OptionSpec::parse(std::string_view text, const std::string& where) const {
  if (auto v = try_parse(text)) return *v;
  const std::string shown = secret ? "<redacted>" : std::string(text);
  throw Error(ErrorKind::kInvalidArgument,
              where + ": expected " + expected() + ", got \"" + shown + "\"");
}

OptionValue OptionSpec::from_json(const nlohmann::json& j, const std::string& where) const {
  std::optional<OptionValue> v;
  switch (type) {
    case OptionType::kBool:
      if (j.is_boolean()) v = j.get<bool>();
      break;
    case OptionType::kInt:
    case OptionType::kBytes:
      if (j.is_number_integer() && !(j.is_number_unsigned() && j.get<uint64_t>() > INT64_MAX)) {
        v = j.get<int64_t>();
      } else if (type == OptionType::kBytes && j.is_string()) {
        v = try_parse(j.get<std::string>());
      }
      break;
    case OptionType::kFloat:
      if (j.is_number()) v = j.get<double>();
      break;
    case OptionType::kString:
    case OptionType::kEnum:
      if (j.is_string()) v = j.get<std::string>();
      break;
  }
  if (v && accepts(*v)) return *v;
  throw Error(ErrorKind::kInvalidConfig,
              where + ": expected " + expected() + ", got " + (secret ? "<redacted>" : j.dump()));
}

nlohmann::json OptionSpec::to_json(const OptionValue& v) const {
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}

std::string OptionSpec::format(const OptionValue& v) const {
  if (const std::string* s = std::get_if<std::string>(&v)) {
    return secret && !s->empty() ? "<redacted>" : *s;
  }
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const int64_t* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  return number_text(std::get<double>(v));
}

OptionRegistry::OptionRegistry(std::vector<OptionSpec> specs) : specs_(std::move(specs)) {
  const std::vector<std::string> problems = table_problems(specs_);
  SPARKGLM_ASSERT(problems.empty(), problems.empty() ? "" : problems.front());
}

std::vector<std::string> OptionRegistry::table_problems(const std::vector<OptionSpec>& specs) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const OptionSpec& s : specs) {
    const std::string who = "option \"" + s.name + "\"";
    if (!is_option_name(s.name)) out.push_back(who + ": name is not lowercase words joined by '-'");
    if (s.name == "profile" || s.name.rfind("no-", 0) == 0)
      out.push_back(who + ": name is reserved (--profile, --no-<bool>)");
    if (!seen.insert(s.name).second) out.push_back(who + ": listed twice");
    if (s.help.empty()) out.push_back(who + ": no help text");
    if (s.type == OptionType::kEnum && s.allowed.empty())
      out.push_back(who + ": no allowed values");
    if (std::set<std::string>(s.allowed.begin(), s.allowed.end()).size() != s.allowed.size())
      out.push_back(who + ": an allowed value is listed twice");
    if (s.min_int > s.max_int || s.min_float > s.max_float) out.push_back(who + ": empty range");
    const bool textual = s.type == OptionType::kString || s.type == OptionType::kEnum;
    for (const OptionValue* v : {&s.default_value, &s.builtin}) {
      const std::string* str = std::get_if<std::string>(v);
      if (!s.accepts(*v) && !(textual && str && str->empty()))
        out.push_back(who + ": default or built-in value is not " + s.expected());
    }
    const bool promoted = s.default_value != s.builtin;
    if (promoted && (!s.receipt || !ReceiptRef::is_id(s.receipt->id) ||
                     !ReceiptRef::is_sha256(s.receipt->sha256)))
      out.push_back(who +
                    ": default differs from the built-in without a valid receipt id and sha256");
    if (!promoted && s.receipt) out.push_back(who + ": a receipt but no promoted default");
    if (s.secret && s.section != ProfileSection::kCommandLineOnly)
      out.push_back(who + ": a secret must be settable on the command line only");
    if (!s.not_implemented.empty() && (promoted || s.status != OptionStatus::kDefault))
      out.push_back(who + ": not implemented, so it can be neither promoted nor a candidate");
  }
  return out;
}

const OptionSpec* OptionRegistry::find(std::string_view name) const {
  for (const OptionSpec& s : specs_)
    if (s.name == name) return &s;
  return nullptr;
}

std::string OptionRegistry::suggest(std::string_view name) const {
  std::string best;
  size_t best_distance = std::max<size_t>(2, name.size() / 5) + 1;
  for (const OptionSpec& s : specs_) {
    const size_t d = edit_distance(name, s.name);
    if (d < best_distance) best = s.name, best_distance = d;
  }
  return best;
}

const OptionSpec& OptionRegistry::at(std::string_view name) const {
  if (const OptionSpec* s = find(name)) return *s;
  std::string message = "unknown option --" + std::string(name);
  if (const std::string near = suggest(name); !near.empty())
    message += " (did you mean --" + near + "?)";
  throw Error(ErrorKind::kInvalidArgument, message);
}

std::string OptionRegistry::usage() const {
  std::string out;
  for (const OptionSpec& s : specs_) {
    std::string head = "  --" + s.name + placeholder(s);
    head.resize(std::max<size_t>(head.size() + 1, 40), ' ');
    const std::string shown = s.format(s.default_value);
    out += head + s.help + " [" + to_string(s.type) + ", default " +
           (shown.empty() ? "unset" : shown) + "]";
    if (!s.not_implemented.empty())
      out += " NOT IMPLEMENTED YET (" + s.not_implemented + "): only the default is accepted";
    out += "\n";
  }
  return out;
}

}  // namespace sparkglm
