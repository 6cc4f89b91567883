#include "gates/static_gate.h"

#include <fstream>
#include <sstream>

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

// ctest leaves Testing/Temporary/LastTestsFailed.log only when a test failed, and LastTest.log
// after every run.
CriterionResult ctest_criterion(const Criterion& c, const fs::path& dir) {
  const fs::path tmp = dir / "Testing" / "Temporary";
  if (!fs::exists(tmp / "LastTest.log"))
    return {c.name, "no ctest run found", "every test passed", false,
            "no " + (tmp / "LastTest.log").string()};
  std::ifstream failed(tmp / "LastTestsFailed.log");
  std::string line, names;
  int64_t count = 0;
  while (std::getline(failed, line)) {
    if (line.empty()) continue;
    ++count;
    if (count <= 5) names += (names.empty() ? "" : ", ") + line;
  }
  return {c.name, count, 0, count == 0, names.empty() ? "" : "failed: " + names};
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
