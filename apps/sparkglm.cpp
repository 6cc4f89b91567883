// sparkglm: the operator tool.
#include <cstdio>
#include <cstring>

#include "engine/core/build_info.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--version") == 0) {
    std::fputs(sparkglm::version_text("sparkglm").c_str(), stdout);
    return 0;
  }
  return 0;
}
