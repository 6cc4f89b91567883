#include "engine/options/api_key_source.h"

#include <cstdlib>
#include <fstream>

#include "engine/core/error.h"

namespace sparkglm {

namespace {

constexpr size_t kMaxKeyBytes = 4096;

[[noreturn]] void bad(const std::string& message) {
  throw Error(ErrorKind::kInvalidArgument, message);
}

bool is_env_name(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name)
    if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
      return false;
  return true;
}

// A bearer token is sent in a header: printable ASCII, no spaces.
std::string checked(const std::string& key, const std::string& where) {
  if (key.empty()) bad(where + " is empty");
  if (key.size() > kMaxKeyBytes)
    bad(where + " holds " + std::to_string(key.size()) + " bytes; an API key has at most " +
        std::to_string(kMaxKeyBytes));
  for (char c : key)
    if (c <= ' ' || c == 127)
      bad(where + " holds a space or control character; an API key is printable ASCII");
  return key;
}

}  // namespace

std::string resolve_api_key(const ApiKeySource& source) {
  const int given =
      int(!source.key.empty()) + int(!source.file.empty()) + int(!source.env_name.empty());
  if (given > 1)
    bad("give one of --api-key, --api-key-file and --api-key-env, not " + std::to_string(given));
  if (!source.key.empty()) return checked(source.key, "--api-key");
  if (!source.file.empty()) {
    std::ifstream in(source.file, std::ios::binary);
    if (!in) bad("--api-key-file " + source.file + ": cannot be read");
    std::string text(kMaxKeyBytes + 2, '\0');
    in.read(text.data(), std::streamsize(text.size()));
    text.resize(size_t(in.gcount()));
    // Editors end the line; the key is the line without its end.
    const size_t end = text.find_first_of("\r\n");
    return checked(text.substr(0, end), "--api-key-file " + source.file);
  }
  if (!source.env_name.empty()) {
    if (!is_env_name(source.env_name))
      bad("--api-key-env \"" + source.env_name +
          "\": expected a variable name [A-Za-z_][A-Za-z0-9_]*");
    const char* value = std::getenv(source.env_name.c_str());
    if (!value) bad("--api-key-env " + source.env_name + ": the variable is not set");
    return checked(value, "--api-key-env " + source.env_name);
  }
  return "";
}

}  // namespace sparkglm
