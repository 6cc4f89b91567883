#pragma once
// Where sparkglm-serve's API key comes from: --api-key KEY (visible to every user in
// /proc/<pid>/cmdline, so for tests), --api-key-file PATH (the file's first line), or
// --api-key-env NAME (the variable NAME, which only the process's owner can read in
// /proc/<pid>/environ). `sparkglm start` uses the last two so that no key is ever in an argv.
#include <string>

namespace sparkglm {

struct ApiKeySource {
  std::string key;       // --api-key
  std::string file;      // --api-key-file
  std::string env_name;  // --api-key-env
};

// The key, "" when none of the three is given. Error(kInvalidArgument) naming the flag: more than
// one given, a file that cannot be read, is empty or over 4 KiB, a variable that is unset or empty,
// a variable name that is not [A-Za-z_][A-Za-z0-9_]*, a key with a space or control character.
std::string resolve_api_key(const ApiKeySource& source);

}  // namespace sparkglm
