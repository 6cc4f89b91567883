#pragma once
// The gate commands of sparkglm-qualify: `run`, `measure` and `promote`. Each takes the arguments
// after its name and returns the exit status (0 done / gates passed, 1 a gate failed or promotion
// refused, 2 bad arguments or a run that could not be made).
#include <ostream>
#include <string>
#include <vector>

namespace sparkglm::gates {

int run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `measure`: a measurement bundle from runner-bench files (gates/engine_measurement.h).
int measure_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int promote_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace sparkglm::gates
