#pragma once
// The operator subcommands of `sparkglm` (apps/sparkglm.cpp dispatches to them). Each takes the
// arguments after its command word and returns the process exit status; bad input throws Error.
#include <string>
#include <vector>

#include "engine/core/cli_args.h"
#include "operator/profile_store.h"

namespace sparkglm::operator_tool {

extern const char* const kOperatorUsage;

// recipe apply <url|path> [--name N] [--model DIR] [--profile-dir D] [--yes] [--dry-run] ...
int recipe_command(const std::vector<std::string>& args);
// profile list | show P | diff A B | use P
int profile_command(const std::vector<std::string>& args);
// start | stop | status | logs
int engine_command(const std::string& command, const std::vector<std::string>& args);

// Shared flags: --profile-dir (default: the project's profiles/), --state-dir
// (default_state_dir()).
std::string profile_dir_from(const CliArgs& flags);
std::string state_dir_from(const CliArgs& flags);
ProfileStore store_from(const CliArgs& flags);

}  // namespace sparkglm::operator_tool
