#pragma once
// Where the tests find the checkout and the build. CMake writes the paths into a generated source
// (tests/support/build_paths.cpp.in), so no test source needs a compile definition and each one
// compiles alone. $SPARKGLM_SOURCE_DIR, when set, names another checkout (a test binary carried to
// another machine).
#include <string>

namespace sparkglm::testing {

std::string source_dir();     // the checkout: gates/, workloads/, the committed weights
std::string binary_dir();     // the build folder: sparkglm-serve, scratch folders
std::string test_data_dir();  // tests/data in the checkout

}  // namespace sparkglm::testing
