#include "engine/core/build_info.h"

#include <sstream>

namespace sparkglm {

std::string version_text(const char* program) {
  const BuildInfo& b = build_info();
  std::ostringstream out;
  out << program << " " << b.version << "\n"
      << "commit: " << b.commit << "\n"
      << "clean_tree: " << b.clean_tree << "\n"
      << "compiler: " << b.compiler << "\n"
      << "build_type: " << b.build_type << "\n"
      << "cuda: " << (b.cuda_version[0] ? b.cuda_version : "not built") << "\n"
      << "nccl: " << (b.nccl_version[0] ? b.nccl_version : "not built") << "\n";
  return out.str();
}

}  // namespace sparkglm
