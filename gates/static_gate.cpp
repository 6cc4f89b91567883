#include "gates/static_gate.h"

#include <fstream>
#include <istream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/options/profile.h"
#include "gates/change_class_policy.h"
#include "gates/promotion.h"
#include "gates/verdict_rederivation.h"
#include "receipts/results_index.h"

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;

std::string first_problems(const receipts::Problems& problems, size_t max = 5) {
  std::string out;
  for (size_t i = 0; i < problems.size() && i < max; ++i)
    out += (i ? "; " : "") + problems[i].to_string();
  if (problems.size() > max) out += "; and " + std::to_string(problems.size() - max) + " more";
  return out;
}

CriterionResult problems_criterion(const Criterion& c, const receipts::Problems& problems) {
  CriterionResult r{c.name, int64_t(problems.size()), 0, problems.empty(),
                    first_problems(problems)};
  return r;
}

receipts::Problems profile_problems(const StaticGateInputs& in) {
  receipts::Problems problems;
  const ChangeClassPolicy policy = ChangeClassPolicy::load(in.gates.string());
  for (const std::string& name : profile_names(in.profiles.string())) {
    const std::string where = "profiles/" + name + ".json";
    try {
      const Profile p = Profile::load(name, in.profiles.string());
      for (const std::string& option : p.unbacked_options())
        problems.push_back({where + ": options." + option,
                            "differs from the engine's default with no receipt (promote it with "
                            "sparkglm-qualify promote, or remove it)"});
      for (const auto& [option, promotion] : p.promotions()) {
        const fs::path bundle = in.receipts / "results" / promotion.receipt.id;
        if (!fs::is_directory(bundle)) {
          problems.push_back({where + ": promotions." + option,
                              "receipt " + promotion.receipt.id + " is not committed under " +
                                  (in.receipts / "results").string()});
          continue;
        }
        for (receipts::Problem& q : receipt_backs_option(
                 bundle, serving_options().at(option), promotion.value, policy,
                 full_verification(in.receipts / "keys", in.gates), promotion.receipt.sha256))
          problems.push_back({where + ": promotions." + option, q.to_string()});
      }
    } catch (const Error& e) {
      problems.push_back({where, e.what()});
    }
  }
  return problems;
}

// The tests of the last ctest run that did not pass, read from Testing/Temporary/LastTest.log,
// which ctest writes anew at every run: one section per test, opened by "N/M Testing: NAME" and
// holding "Test Failed." for a failure or a timeout, or `Command: ""` for a test that could not
// start (its section still says "Test Passed."). A skipped test says "Test Pass Reason:". What a
// test printed (between "Output:" and "<end of output>") is skipped.
// LastTestsFailed.log is not read: ctest leaves it in place after a later run that passed.
std::vector<std::string> failed_in_last_run(std::istream& log) {
  static const std::regex opens(R"(^\d+/\d+ Testing: (.+)$)");
  std::vector<std::string> failed;
  std::string line, test;
  bool marked = false, output = false;  // output: inside a test's own output, which is not read
  std::smatch m;
  while (std::getline(log, line)) {
    if (output) {
      output = line != "<end of output>";
    } else if (line == "Output:") {
      output = true;
    } else if (std::regex_match(line, m, opens)) {
      test = m[1];
      marked = false;
    } else if (!test.empty() && !marked && (line == "Test Failed." || line == "Command: \"\"")) {
      failed.push_back(test);
      marked = true;
    }
  }
  return failed;
}

CriterionResult ctest_criterion(const Criterion& c, const fs::path& dir) {
  const fs::path log = dir / "Testing" / "Temporary" / "LastTest.log";
  std::ifstream in(log);
  if (!in) return {c.name, "no ctest run found", "every test passed", false, "no " + log.string()};
  const std::vector<std::string> failed = failed_in_last_run(in);
  std::string names;
  for (size_t i = 0; i < failed.size() && i < 5; ++i)
    names += (names.empty() ? "" : ", ") + failed[i];
  return {c.name, int64_t(failed.size()), 0, failed.empty(),
          names.empty() ? "" : "failed: " + names};
}

}  // namespace

GateResult evaluate_static_gate(const GateDefinition& definition, const StaticGateInputs& in) {
  GateResult result;
  result.id = definition.id;
  std::string skipped;
  for (const Criterion& c : definition.criteria) {
    if (c.check == "receipts_verify") {
      // The full verification: trusted signatures and verdicts re-derived, as `verify-all` does.
      receipts::Problems all =
          receipts::verify_all(in.receipts, full_verification(in.receipts / "keys", in.gates));
      receipts::Problems bundles;
      for (receipts::Problem& p : all)
        if (p.where.rfind(receipts::kIndexName, 0) != 0) bundles.push_back(p);
      result.criteria.push_back(problems_criterion(c, bundles));
    } else if (c.check == "index_fresh") {
      result.criteria.push_back(problems_criterion(c, receipts::stale_index_problems(in.receipts)));
    } else if (c.check == "profiles_backed") {
      result.criteria.push_back(problems_criterion(c, profile_problems(in)));
    } else if (c.check == "ctest") {
      if (in.ctest_dir.empty())
        skipped += (skipped.empty() ? "" : ", ") + c.name;
      else
        result.criteria.push_back(ctest_criterion(c, in.ctest_dir));
    } else {
      throw Error(ErrorKind::kInvalidConfig,
                  "G0 has no static check \"" + c.check + "\" (criterion " + c.name + ")");
    }
  }
  if (!skipped.empty())
    result.summary = "not judged here (no --ctest-dir): " + skipped +
                     "; build and format are checked by ci/test.sh";
  result.conclude();
  return result;
}

}  // namespace sparkglm::gates
