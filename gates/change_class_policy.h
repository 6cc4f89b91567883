#pragma once
// QUALIFICATION.md's minimum gates by change class, as data (gates/change-classes.json): which
// gates a change of each class must pass to be accepted, which to change a default, whether its
// numerics may move (so G2's token-id identity is waived when G1 declared the change), and the
// class each profile option belongs to.
#include <map>
#include <string>
#include <vector>

namespace sparkglm::gates {

struct ChangeClass {
  std::string name;
  std::vector<std::string> required;           // to be accepted
  std::vector<std::string> to_change_default;  // to be promoted into a profile
  bool numerics_may_move = false;
};

class ChangeClassPolicy {
 public:
  static ChangeClassPolicy load(const std::string& gates_dir);  // errors name file and field

  const ChangeClass& at(const std::string& name) const;  // throws naming the known classes
  // The class of a change to profile option `option` (its own entry, else "default").
  const ChangeClass& for_option(const std::string& option) const;
  const std::string& sha256() const { return sha256_; }

 private:
  std::map<std::string, ChangeClass> classes_;
  std::map<std::string, std::string> options_;
  std::string sha256_;
};

}  // namespace sparkglm::gates
