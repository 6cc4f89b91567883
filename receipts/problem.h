#pragma once
// One thing wrong with a bundle: where it is (a file in the bundle, or a field of
// qualification.json) and what was expected. Checks collect every problem rather than stopping at
// the first, so that one run of `verify` shows everything a bundle's author has to fix.
#include <string>
#include <vector>

namespace sparkglm::receipts {

struct Problem {
  std::string where;  // "qualification.json: artifacts[2].sha256", "server/baseline/server.log"
  std::string what;   // what is wrong, and what was expected
  std::string to_string() const { return where + ": " + what; }
};
using Problems = std::vector<Problem>;

}  // namespace sparkglm::receipts
