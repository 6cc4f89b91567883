#pragma once
// Command-line flags of the form `--name value` and `--flag`, with typed getters whose errors name
// the flag and the value expected. Unknown flags are an error, never ignored; so is a flag that is
// known but that the command did not read for what it was asked (reject_unread): a command reads
// every flag it will use before it starts its work, then calls reject_unread.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace sparkglm {

class CliArgs {
 public:
  // `switches` are flags that take no value; every other flag takes exactly one.
  CliArgs(const std::vector<std::string>& args, const std::set<std::string>& switches);

  bool has(const std::string& flag) const;
  std::string str(const std::string& flag, const std::string& fallback) const;
  std::string required(const std::string& flag) const;
  int64_t integer(const std::string& flag, int64_t fallback, int64_t min, int64_t max) const;
  std::vector<int32_t> int_list(const std::string& flag) const;  // "1,2,3"
  const std::vector<std::string>& positional() const { return positional_; }
  // Throws for any flag not in `known` (and not a switch).
  void allow_only(const std::set<std::string>& known) const;
  // Throws Error(kInvalidArgument) "--X: given but not used by <command> (...)" for the first flag
  // given that no getter (has, str, required, integer, int_list) has read yet.
  void reject_unread(const std::string& command) const;

 private:
  void mark_read(const std::string& flag) const { read_.insert(flag); }

  std::map<std::string, std::string> values_;
  mutable std::set<std::string> read_;  // flags a getter asked for
  std::vector<std::string> positional_;
};

// Throws Error(kInvalidArgument) naming the first argument that is not valid UTF-8. The binaries
// record their arguments as JSON text (bundles, effective configurations), which cannot hold such
// bytes, so they refuse them before doing anything.
void refuse_non_utf8_arguments(const std::vector<std::string>& args);

}  // namespace sparkglm
