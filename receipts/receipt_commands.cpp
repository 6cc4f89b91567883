#include "receipts/receipt_commands.h"

#include <cstdlib>
#include <filesystem>
#include <functional>

#include <nlohmann/json.hpp>

#include "engine/core/cli_args.h"
#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "receipts/attestation.h"
#include "receipts/bundle_file.h"
#include "receipts/bundle_verifier.h"
#include "receipts/qualification_record.h"
#include "receipts/results_index.h"

namespace sparkglm::receipts {

namespace fs = std::filesystem;

namespace {

constexpr int kOk = 0;
constexpr int kFailed = 1;
constexpr int kUsage = 2;

// Runs a command body, turning an Error (bad argument, unreadable file) into exit status 2. A
// JSON type error is a bundle of a shape no reader checked for: refused the same way, not a crash.
int guarded(const char* command, std::ostream& err, const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    err << command << ": " << e.what() << "\n";
    return kUsage;
  } catch (const nlohmann::json::exception& e) {
    err << command << ": a JSON value of an unexpected type or shape: " << e.what() << "\n";
    return kUsage;
  }
}

// The single positional argument `what`, e.g. the bundle folder.
std::string only_positional(const CliArgs& args, const char* what) {
  if (args.positional().size() != 1)
    throw Error(ErrorKind::kInvalidArgument, std::string("expected one ") + what + ", got " +
                                                 std::to_string(args.positional().size()));
  return args.positional()[0];
}

// --keys and --gates, and the verdict check, as every verifying command takes them.
VerifyOptions verify_options(const CliArgs& args, const fs::path& default_keys,
                             VerdictCheck verdicts) {
  VerifyOptions options;
  options.trusted_keys = args.str("--keys", default_keys.string());
  options.gates = args.str("--gates", "gates");
  options.verdicts = verdicts;
  return options;
}

int report(const std::string& subject, const Problems& problems, std::ostream& err) {
  err << "FAIL " << subject << ": " << problems.size()
      << (problems.size() == 1 ? " problem\n" : " problems\n");
  for (const Problem& p : problems) err << "  " << p.to_string() << "\n";
  return kFailed;
}

}  // namespace

int verify_command(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err,
                   VerdictCheck verdicts) {
  return guarded("verify", err, [&] {
    const CliArgs args(argv, {});
    args.allow_only({"--pubkey", "--keys", "--gates"});
    const std::string bundle = only_positional(args, "bundle folder");
    VerifyOptions options = verify_options(args, kTrustedKeysFolder, verdicts);
    if (args.has("--pubkey")) options.public_key = read_public_key(args.required("--pubkey"));
    const Problems problems = verify_bundle(bundle, options);
    if (!problems.empty()) return report(bundle, problems, err);
    const std::string manifest = read_file(fs::path(bundle) / kManifestName);
    out << "OK " << bundle << ": qualification.json sha256 " << sha256_hex(manifest)
        << (options.public_key.empty() ? "" : ", signed by " + options.public_key)
        << (verdicts ? ", gate verdicts re-derived" : "") << "\n";
    return kOk;
  });
}

int verify_all_command(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err,
                       VerdictCheck verdicts) {
  return guarded("verify-all", err, [&] {
    const CliArgs args(argv, {});
    args.allow_only({"--receipts", "--keys", "--gates"});
    if (!args.positional().empty())
      throw Error(ErrorKind::kInvalidArgument, "unexpected argument " + args.positional()[0]);
    const fs::path receipts = args.str("--receipts", "receipts");
    const Problems problems =
        verify_all(receipts, verify_options(args, receipts / "keys", verdicts));
    if (!problems.empty()) return report(receipts.string(), problems, err);
    out << "OK " << receipts.string() << ": " << build_index(receipts)["bundles"].size()
        << " bundle(s) verify and the index is fresh\n";
    return kOk;
  });
}

int index_command(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  return guarded("index", err, [&] {
    const CliArgs args(argv, {});
    args.allow_only({"--receipts"});
    if (!args.positional().empty())
      throw Error(ErrorKind::kInvalidArgument, "unexpected argument " + args.positional()[0]);
    const fs::path receipts = args.str("--receipts", "receipts");
    const auto index = write_index(receipts);
    out << "wrote " << (receipts / kIndexName).string() << ": " << index["bundles"].size()
        << " bundle(s)\n";
    return kOk;
  });
}

int sign_command(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err,
                 VerdictCheck verdicts) {
  return guarded("sign", err, [&] {
    const CliArgs args(argv, {});
    args.allow_only({"--key", "--by", "--state", "--keys", "--gates"});
    const std::string bundle = only_positional(args, "bundle folder");
    const char* user = std::getenv("USER");
    const std::string by = args.str("--by", user ? user : "");
    const Problems problems =
        sign_bundle(bundle, args.required("--key"), by,
                    verify_options(args, kTrustedKeysFolder, verdicts), args.str("--state", ""));
    if (!problems.empty()) {
      err << "sign: refusing to sign; the signed bundle would not verify\n";
      return report(bundle, problems, err);
    }
    out << "signed " << bundle << " as maintainer-reviewed by " << by << "\n";
    return kOk;
  });
}

int keygen_command(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  return guarded("keygen", err, [&] {
    const CliArgs args(argv, {});
    args.allow_only({"--out"});
    if (!args.positional().empty())
      throw Error(ErrorKind::kInvalidArgument, "unexpected argument " + args.positional()[0]);
    const fs::path key = args.required("--out");
    fs::path pub = key;
    pub.replace_extension(".pub");
    std::error_code ec;
    if (pub == key || fs::exists(fs::symlink_status(pub, ec)))
      throw Error(ErrorKind::kInvalidArgument,
                  pub.string() + ": exists; keygen never overwrites a key");
    const std::string public_key = generate_key(key);
    write_file_atomically(pub, public_key + "\n");
    out << "wrote " << key.string() << " (private, keep it out of the repository) and "
        << pub.string() << "\npublic key: " << public_key << "\n";
    return kOk;
  });
}

}  // namespace sparkglm::receipts
