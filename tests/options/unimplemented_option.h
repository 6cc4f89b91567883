#pragma once
// Every serving option is implemented today (precision-mode spark was the last, issue 15), so the
// tests of the not-implemented path add this one to the table: the refusal and the usage mark
// must still work for the next option that lands before its code.
#include <string>

#include "engine/options/option_registry.h"

namespace sparkglm::testing {

inline OptionSpec unimplemented_option() {
  OptionSpec o;
  o.name = "weight-layout";
  o.type = OptionType::kEnum;
  o.default_value = o.builtin = std::string("rows");
  o.allowed = {"rows", "tiles"};
  o.help = "how projections are laid out in memory";
  o.not_implemented = "no kernel reads tiles";
  return o;
}

}  // namespace sparkglm::testing
