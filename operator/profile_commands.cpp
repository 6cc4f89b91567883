// `sparkglm profile list|show|diff|use` and `sparkglm recipe apply`.
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "engine/core/error.h"
#include "engine/options/profile.h"
#include "operator/commands.h"
#include "operator/engine_process.h"
#include "operator/overwrite_prompt.h"
#include "operator/recipe.h"
#include "operator/recipe_fetch.h"
#include "operator/recipe_translation.h"
#include "operator/text_diff.h"

namespace sparkglm::operator_tool {

namespace fs = std::filesystem;

const char* const kOperatorUsage =
    R"(  recipe apply URL|FILE                translate a published recipe into a profile
       [--name NAME] [--model DIR] [--profile-dir DIR] [--dry-run] [--yes]
       [--max-bytes N] [--timeout SECONDS]
  profile list|show P|diff A B|use P   the profiles in --profile-dir (default: profiles/)
  start [--profile P] [--port N] [--bind ADDR] [--wait SECONDS] [-- SERVE-FLAGS...]
       [--api-key-file PATH | --api-key-env NAME]
                                       run sparkglm-serve in the background, wait for /health
                                       (the key is never in an argv or a state file)
  stop [--timeout SECONDS] [--force]   SIGTERM the engine (SIGKILL after the wait with --force)
  status                               version, profile, pid, health and pool use
  logs [--lines N]                     the engine's log (default: the last 100 lines)
       every engine command takes --state-dir DIR (default: $XDG_STATE_HOME/sparkglm or
       ~/.local/state/sparkglm, made 0700) for engine.pid, engine.json and engine.log (0600)
)";

std::string profile_dir_from(const CliArgs& flags) {
  return flags.has("--profile-dir") ? flags.str("--profile-dir", "") : default_profile_dir();
}

std::string state_dir_from(const CliArgs& flags) {
  const std::string dir =
      flags.has("--state-dir") ? flags.str("--state-dir", "") : default_state_dir();
  return fs::absolute(dir).lexically_normal().string();
}

ProfileStore store_from(const CliArgs& flags) {
  return ProfileStore(profile_dir_from(flags), state_dir_from(flags));
}

namespace {

const std::set<std::string> kSwitches = {"--yes", "--dry-run", "--force"};

int apply(const CliArgs& a) {
  a.allow_only({"--name", "--model", "--profile-dir", "--state-dir", "--yes", "--dry-run",
                "--max-bytes", "--timeout"});
  if (a.positional().size() != 1)
    throw Error(ErrorKind::kInvalidArgument,
                "expected `sparkglm recipe apply URL|FILE` with one recipe, got " +
                    std::to_string(a.positional().size()));
  const ProfileStore store = store_from(a);
  HttpLimits limits;
  limits.max_bytes = size_t(a.integer("--max-bytes", 1 << 20, 1, int64_t(1) << 30));
  limits.timeout_s = double(a.integer("--timeout", 30, 1, 3600));
  const FetchedRecipe fetched = fetch_recipe(a.positional()[0], limits);
  const Recipe recipe = parse_recipe(fetched.json, fetched.source);
  TranslationOptions options;
  options.name = a.str("--name", "");
  options.model_dir = a.str("--model", "");
  const ProfileDraft draft = translate_recipe(recipe, fetched, options, store.dir());
  const std::string path = store.path_of(draft.name);

  std::cout << describe(draft) << "\n" << path << ":\n" << draft.text << "\n";
  const bool exists = fs::exists(path);
  if (exists) {
    const std::string diff = unified_diff(read_text_file(path), draft.text, path, path + " (new)");
    std::cout << "a profile of that name exists; the changes:\n"
              << (diff.empty() ? "(no change)\n" : diff) << "\n";
  }
  if (a.has("--dry-run")) {
    std::cout << "dry run: nothing was written\n";
    return 0;
  }
  std::cout.flush();
  if (exists) {
    switch (ask_overwrite("Overwrite " + path + "?", a.has("--yes"), stdin, stdout)) {
      case OverwriteAnswer::kYes:
        break;
      case OverwriteAnswer::kNo:
        std::cout << "not overwritten: " << path << " is unchanged\n";
        return 1;
      case OverwriteAnswer::kNoTerminal:
        std::fprintf(stderr,
                     "sparkglm: %s exists and there is no terminal to ask: pass --yes to "
                     "overwrite it (a backup is kept) or --dry-run to only see the diff; nothing "
                     "was written\n",
                     path.c_str());
        return 2;
    }
  }
  const ProfileStore::Written w = store.write(draft.name, draft.text);
  std::cout << "wrote " << w.path
            << (w.backup.empty() ? "" : " (the previous file is kept as " + w.backup + ")") << "\n";
  return 0;
}

int list(const CliArgs& a) {
  a.allow_only({"--profile-dir", "--state-dir"});
  const ProfileStore store = store_from(a);
  const std::string used = store.used();
  const std::vector<std::string> names = store.names();
  if (names.empty()) std::cout << "no profiles in " << store.dir() << "\n";
  for (const std::string& name : names) {
    std::string line = (name == used ? "* " : "  ") + name;
    try {
      const Profile p = Profile::load(name, store.dir());
      std::string d = p.description();
      if (d.size() > 76) d = d.substr(0, 73) + "...";
      line += "\n      " + d;
    } catch (const Error& e) {
      line += "\n      INVALID: " + e.message();
    }
    std::cout << line << "\n";
  }
  return 0;
}

}  // namespace

int recipe_command(const std::vector<std::string>& args) {
  if (args.empty() || args[0] != "apply")
    throw Error(ErrorKind::kInvalidArgument, "expected `sparkglm recipe apply URL|FILE`");
  return apply(CliArgs({args.begin() + 1, args.end()}, kSwitches));
}

int profile_command(const std::vector<std::string>& args) {
  const std::string sub = args.empty() ? "" : args[0];
  const CliArgs a({args.begin() + (args.empty() ? 0 : 1), args.end()}, kSwitches);
  if (sub == "list") return list(a);
  a.allow_only({"--profile-dir", "--state-dir"});
  const ProfileStore store = store_from(a);
  const std::vector<std::string>& p = a.positional();
  const size_t wanted = sub == "diff" ? 2 : 1;
  if ((sub == "show" || sub == "use" || sub == "diff") && p.size() != wanted)
    throw Error(ErrorKind::kInvalidArgument, "sparkglm profile " + sub + ": expected " +
                                                 std::to_string(wanted) + " profile name(s)");
  if (sub == "show") {
    const std::string path = store.resolve(p[0]);
    const Profile profile = Profile::load(path, store.dir());
    std::cout << read_text_file(path);
    std::fprintf(stderr, "%s: valid, sha256 %s, %zu option(s) set\n", path.c_str(),
                 profile.sha256().c_str(), profile.values().size());
    return 0;
  }
  if (sub == "diff") {
    const std::string a_path = store.resolve(p[0]), b_path = store.resolve(p[1]);
    const std::string diff =
        unified_diff(read_text_file(a_path), read_text_file(b_path), a_path, b_path);
    std::cout << (diff.empty() ? "the profiles are identical\n" : diff);
    return diff.empty() ? 0 : 1;
  }
  if (sub == "use") {
    store.use(p[0]);
    std::cout << "sparkglm start now uses profile " << p[0] << " (recorded in " << state_dir_from(a)
              << "/profile)\n";
    return 0;
  }
  throw Error(ErrorKind::kInvalidArgument,
              "expected `sparkglm profile list|show P|diff A B|use P`, got \"" + sub + "\"");
}

}  // namespace sparkglm::operator_tool
